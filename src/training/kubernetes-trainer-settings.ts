import { z } from 'zod';
import { clusterSettingsShape, dnsLabel } from '../kubernetes/settings.js';

/** trainer.kubernetes, as the config declares it (see kubernetes-trainer.ts for what each does). */
export const kubernetesTrainerSchema = z.strictObject({
  template: z
    .string()
    .min(1)
    .describe('A Job manifest (YAML) with {{placeholders}}; a path relative to the config file'),
  image: z.string().min(1).describe('The trainer image, for {{image}} and containers without one'),
  namespace: dnsLabel.default('default').describe('Where the training Jobs are created'),
  container: z.string().min(1).optional().describe('The container that trains (the first one when unset)'),
  timeoutSeconds: z
    .number()
    .positive()
    .max(7 * 86_400)
    .default(6 * 3600)
    .describe('Longest training, counted from the container start'),
  pendingTimeoutSeconds: z
    .number()
    .positive()
    .max(86_400)
    .default(1800)
    .describe('Longest wait for the pod to be scheduled and start (GPUs can be scarce)'),
  ttlSecondsAfterFinished: z
    .number()
    .int()
    .min(0)
    .default(86_400)
    .describe('Kubernetes deletes a finished Job this long after it ends'),
  artifactsImage: z
    .string()
    .min(1)
    .optional()
    .describe(
      "Rein's image, for the containers that pull the batch and parent from S3 and push the new checkpoint when artifacts.url is set; default: image (the tfjs trainer's image is Rein's); required with the PyTorch engine",
    ),
  artifactsSecret: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, 'a Secret name')
    .optional()
    .describe(
      "A Secret whose keys become those containers' environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, …); unset: the pod's own identity, e.g. an IAM role of the rein-trainer ServiceAccount",
    ),
  ...clusterSettingsShape,
});
export type KubernetesTrainerSettings = z.output<typeof kubernetesTrainerSchema>;

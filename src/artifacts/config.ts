import { z } from 'zod';

/** The config's `artifacts` section: dataDir/artifacts, or an S3 bucket. */
export const artifactsSettings = z.strictObject({
  url: z
    .string()
    .regex(
      /^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/.*)?$/,
      'write s3://bucket/optional/prefix (a bucket name is 3-63 lowercase letters, digits, dots, hyphens)',
    )
    .optional()
    .describe(
      's3://bucket/prefix: batches, reports, checkpoints and adapters live in that bucket of S3-compatible storage, so services on other hosts read the same URIs (credentials: the standard AWS environment or config); unset: the folder dataDir/artifacts (env REIN_ARTIFACTS_URL)',
    ),
  s3: z
    .strictObject({
      endpoint: z
        .url()
        .optional()
        .describe("An S3-compatible server's URL (MinIO, Ceph, …); unset: AWS S3 (env REIN_S3_ENDPOINT)"),
      region: z
        .string()
        .min(1)
        .optional()
        .describe('Region of the bucket; unset: AWS_REGION, else us-east-1 (env REIN_S3_REGION)'),
      forcePathStyle: z
        .boolean()
        .optional()
        .describe(
          'Address the bucket in the path (most S3-compatible servers want this); default: true with an endpoint, false for AWS (env REIN_S3_FORCE_PATH_STYLE)',
        ),
    })
    .prefault({})
    .describe('Settings of the S3 client (with an s3:// url)'),
});

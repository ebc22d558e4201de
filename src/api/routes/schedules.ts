import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { promotionGuard, promotionMemo, trainingRunInput } from '../../client/runs.js';
import { changeSchedule, createSchedule, listSchedules, type ScheduleListing } from '../../client/schedules.js';
import { runOverrides, type ApiContext } from '../context.js';
import { declaring } from '../declared.js';
import * as s from '../schemas.js';

const CHANGE_SUMMARIES = {
  pause: 'Stop a schedule firing',
  unpause: 'Let a schedule fire again',
  trigger: "Fire now (the schedule's overlap policy applies)",
} as const;

/** Recurring training: Temporal Schedules that start training runs. */
export const scheduleRoutes: FastifyPluginAsyncZod<{ context: ApiContext }> = async (app, { context }) => {
  const { client, config, taskQueue } = context;
  app.get(
    '/api/schedules',
    {
      schema: {
        summary: 'Training schedules with their next and recent runs',
        response: { 200: z.object({ items: z.array(declaring<ScheduleListing>()(s.scheduleListing)) }) },
      },
    },
    async () => ({
      items: await listSchedules(client),
    }),
  );
  app.post(
    '/api/schedules',
    {
      schema: {
        summary: 'Schedule recurring training runs (overlap policy skip by default)',
        body: s.createScheduleBody,
        response: { 201: s.accepted },
      },
    },
    async (req, reply) => {
      const { scheduleId, every, cron, overlap, paused, note } = req.body;
      const input = trainingRunInput(config, runOverrides(req.body));
      await createSchedule(client, taskQueue, {
        scheduleId,
        every,
        cron,
        overlap,
        paused,
        note,
        input,
        config,
        ...promotionMemo(input, promotionGuard(config)),
      });
      return reply.code(201).send({ ok: true });
    },
  );
  for (const change of ['pause', 'unpause', 'trigger'] as const) {
    app.post(
      `/api/schedules/:scheduleId/${change}`,
      {
        schema: {
          summary: CHANGE_SUMMARIES[change],
          params: s.scheduleIdParams,
          body: s.scheduleChangeBody,
          response: { 202: s.accepted },
        },
      },
      async (req, reply) => {
        await changeSchedule(client, req.params.scheduleId, change, req.body?.note);
        return reply.code(202).send({ ok: true });
      },
    );
  }
  app.delete(
    '/api/schedules/:scheduleId',
    {
      schema: {
        summary: 'Delete a schedule (runs it started go on)',
        params: s.scheduleIdParams,
        response: { 200: s.accepted },
      },
    },
    async (req) => {
      await changeSchedule(client, req.params.scheduleId, 'delete');
      return { ok: true as const };
    },
  );
};

import { z } from '@hono/zod-openapi';

export const ProblemSchema = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.int(),
    detail: z.string(),
    errors: z
      .array(z.object({ path: z.string(), message: z.string() }))
      .optional()
      .describe('The failing fields of a request that did not validate.'),
    requestId: z.string().describe("The response's x-request-id, which its log line carries."),
  })
  .openapi('Problem');

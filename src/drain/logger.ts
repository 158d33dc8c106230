/** Structured log lines: one JSON object per line, which Workers Logs and log shippers index. */
export type LogFields = Record<string, unknown>;

export interface Logger {
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

function line(level: string, message: string, fields: LogFields | undefined): string {
  return JSON.stringify({ level, message, ...fields });
}

export const jsonConsoleLogger: Logger = {
  info: (message, fields) => console.log(line('info', message, fields)),
  warn: (message, fields) => console.warn(line('warn', message, fields)),
  error: (message, fields) => console.error(line('error', message, fields)),
};

/** A logger that adds `fields` (a job's id and type, say) to every line. */
export function withFields(logger: Logger, fields: LogFields): Logger {
  return {
    info: (message, more) => logger.info(message, { ...fields, ...more }),
    warn: (message, more) => logger.warn(message, { ...fields, ...more }),
    error: (message, more) => logger.error(message, { ...fields, ...more }),
  };
}

/** An error as log fields: its name and message, never a stack that may carry secrets. */
export function errorFields(error: unknown): LogFields {
  return error instanceof Error ? { error: error.message, errorName: error.name } : { error: String(error) };
}

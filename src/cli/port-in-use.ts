/** A service could not listen because its port is taken; the message names the service and the setting to change. */
export class PortInUseError extends Error {}

/**
 * Starts a listening service; a port already in use becomes a PortInUseError naming the service
 * and its setting, rather than Node's "listen EADDRINUSE".
 */
export async function listenAs<T>(
  service: string,
  setting: string,
  address: { host: string; port: number },
  start: () => Promise<T>,
): Promise<T> {
  try {
    return await start();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    throw new PortInUseError(
      `the ${service} cannot listen on ${address.host}:${address.port}: another program uses that port. Stop it, or set ${setting} to a free port.`,
      { cause: err },
    );
  }
}

/** Kubeconfig documents for the control plane's users: by bearer token, or by client certificate files. */

export const base64 = (text: string) => Buffer.from(text).toString('base64');

export function tokenKubeconfig(server: string, caPem: string, user: string, token: string, namespace: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'test', cluster: { server, 'certificate-authority-data': base64(caPem) } }],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: 'test', context: { cluster: 'test', user, namespace } }],
    'current-context': 'test',
  });
}

export function certKubeconfig(
  server: string,
  caFile: string,
  user: string,
  certFile: string,
  keyFile: string,
): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'test', cluster: { server, 'certificate-authority': caFile } }],
    users: [{ name: user, user: { 'client-certificate': certFile, 'client-key': keyFile } }],
    contexts: [{ name: 'test', context: { cluster: 'test', user } }],
    'current-context': 'test',
  });
}

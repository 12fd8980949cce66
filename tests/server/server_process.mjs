// Starts `kakeya serve` on a free port for a test, and reads its /metrics and
// its server-sent events.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

// Resolves once the server prints its URL. The server's stderr (one line
// per request) is kept, and shown if it exits before it is told to.
export function startServer(bin, args = []) {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, ['serve', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let stopping = false;
    const exited = new Promise((done) => child.on('exit', (code, signal) => done(code ?? `signal ${signal}`)));
    child.on('error', reject);
    child.stderr.on('data', (d) => { stderr += d; });
    child.stdout.on('data', (d) => {
      stdout += d;
      const m = stdout.match(/listening on (http:\/\/[\d.]+:\d+\/v1)/);
      if (m && !server.url) {
        server.url = m[1];
        resolve(server);
      }
    });
    exited.then((code) => {
      if (!stopping) {
        process.stderr.write(stderr);
        reject(new Error(`kakeya serve exited with ${code} before it was stopped:\n${stdout}`));
      }
    });
    const server = {
      url: null,
      pid: child.pid,
      // SIGTERM; resolves to the exit code.
      terminate() {
        stopping = true;
        child.kill('SIGTERM');
        return exited;
      },
      async kill() {
        stopping = true;
        child.kill('SIGKILL');
        await exited;
      },
      // Resident memory in KiB (Linux).
      rssKiB() {
        const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
        return Number(status.match(/VmRSS:\s+(\d+)/)[1]);
      },
      log: () => stderr,
    };
  });
}

// /metrics as a Map from 'name{labels}' to its value.
export async function readMetrics(url, apiKey) {
  const response = await fetch(url.replace(/\/v1$/, '/metrics'),
    { headers: apiKey ? { Authorization: `Bearer ${apiKey}` } : {} });
  if (response.status !== 200) throw new Error(`/metrics answered ${response.status}`);
  const values = new Map();
  for (const line of (await response.text()).split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    values.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return values;
}

export function metric(values, name) {
  return values.get(name) ?? 0;
}

// The JSON chunks of a server-sent event stream, in order (comment lines and
// the closing `data: [DONE]` are skipped).
export async function* sseChunks(response) {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const bytes of response.body) {
    buffer += decoder.decode(bytes, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (event.startsWith('data: {')) yield JSON.parse(event.slice(6));
    }
  }
}

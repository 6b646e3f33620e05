#!/usr/bin/env node
// A command-line MCP client built with the TypeScript SDK v2 (@modelcontextprotocol/client),
// pinned to protocol revision 2026-07-28 by default. It connects to a server over stdio (a
// command after `--`) or Streamable HTTP (--url), runs a list of steps and prints ONE JSON
// object per line for every event it observes, so a test can assert on them.
//
//     node ts_client_2026.mjs [OPTIONS] STEPS_JSON -- CMD [ARGS...]
//     node ts_client_2026.mjs [OPTIONS] --url URL STEPS_JSON
//
// STEPS_JSON is a JSON list of steps, run in order on one connection:
//   {"op": "discover"}                              server/discover on this connection
//   {"op": "list"}                                  tools/list
//   {"op": "call", "name": N, "arguments": {...}}   tools/call (input_required rounds are
//                                                   driven by the SDK through the elicitation
//                                                   handler below)
//   {"op": "cancel", "name": N, "arguments": {...}, "after_ms": MS, "after_marker": LINE}
//                                                   start tools/call, then abort its
//                                                   AbortSignal once LINE appears in
//                                                   $PEER_EVENTS_FILE (if given; bounded by
//                                                   --marker-timeout-ms) and MS more
//                                                   milliseconds have passed (default 0)
//   {"op": "wait_marker", "marker": LINE}           wait (bounded) until LINE is in
//                                                   $PEER_EVENTS_FILE
//   {"op": "listen", "filter": {...}, "events": N}  client.listen(filter) (subscriptions/listen):
//                                                   emit "acknowledged", then "listen_event"
//                                                   per change notification; after N events
//                                                   close() it, or with N = 0 wait (bounded)
//                                                   until it ends ("listen_ended", how)
//
// Options:
//   --mode M               "2026-07-28" (default: versionNegotiation {pin}), "auto" or "legacy"
//   --elicit-json JSON     declare the elicitation capability and answer every
//                          elicitation/create with action "accept" and this content
//   --elicit-action A      answer with action A ("decline" / "cancel") instead
//   --marker-timeout-ms MS bound of every marker wait (default 20000)
//   --env K=V              extra environment variable for the server (repeatable); PEER_*
//                          variables of this process are forwarded as well
//
// Events (field "event"):
//   connected   {protocolVersion, era, serverInfo, supportedVersions}
//   wire        {dir: ">>" (to the server) | "<<" (from it), msg}: every JSON-RPC message on
//               the connection's transport (a stdio probe on the SDK's sibling process is not
//               visible here)
//   elicitation {params}: the SDK called our elicitation handler
//   discover    {step, result}
//   tools       {step, tools: [names]}
//   result      {step, result}
//   aborted     {step, at_ms}: we aborted the call's signal
//   acknowledged {step, honored}: the listen stream is open with this filter
//   listen_event {step, method, params}: a change notification the SDK dispatched
//   listen_ended {step, how}: "local" (we closed it), "graceful" or "remote"
//   error       {step, name, code, message}: the step (or the connection) failed
//   done        {ok}
import { existsSync, readFileSync } from 'node:fs';

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const T0 = performance.now();
const elapsed = () => Math.round((performance.now() - T0) * 10) / 10;

function emit(event, fields = {}) {
    process.stdout.write(`${JSON.stringify({ event, t_ms: elapsed(), ...fields })}\n`);
}

function parseArgs(argv) {
    const dash = argv.indexOf('--');
    const ours = dash === -1 ? argv : argv.slice(0, dash);
    const command = dash === -1 ? [] : argv.slice(dash + 1);
    const opts = { mode: '2026-07-28', env: {}, markerTimeoutMs: 20000, elicitJson: undefined, elicitAction: undefined };
    const rest = [];
    for (let i = 0; i < ours.length; i++) {
        const a = ours[i];
        if (a === '--mode') opts.mode = ours[++i];
        else if (a === '--url') opts.url = ours[++i];
        else if (a === '--elicit-json') opts.elicitJson = JSON.parse(ours[++i]);
        else if (a === '--elicit-action') opts.elicitAction = ours[++i];
        else if (a === '--marker-timeout-ms') opts.markerTimeoutMs = Number(ours[++i]);
        else if (a === '--env') {
            const [k, ...v] = ours[++i].split('=');
            opts.env[k] = v.join('=');
        } else rest.push(a);
    }
    if (rest.length !== 1 || (opts.url === undefined) === (command.length === 0)) {
        process.stderr.write('usage: ts_client_2026.mjs [OPTIONS] STEPS_JSON (-- CMD [ARGS...] | --url URL)\n');
        process.exit(2);
    }
    return { opts, steps: JSON.parse(rest[0]), command };
}

function versionNegotiation(mode) {
    if (mode === 'legacy' || mode === 'auto') return { mode };
    return { mode: { pin: mode } };
}

function errorFields(error) {
    return { name: error?.constructor?.name ?? typeof error, code: error?.code, message: String(error?.message ?? error) };
}

/** Record every message the transport carries; the instance keeps its class (the SDK's
 * sibling-process probe applies only to the base StdioClientTransport). */
function tap(transport) {
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
        emit('wire', { dir: '>>', msg: message });
        return send(message, options);
    };
    let handler;
    Object.defineProperty(transport, 'onmessage', {
        configurable: true,
        get: () => (handler === undefined ? undefined : wrapped),
        set: fn => {
            handler = fn;
        }
    });
    const wrapped = (message, extra) => {
        emit('wire', { dir: '<<', msg: message });
        handler?.(message, extra);
    };
    return transport;
}

function markerPresent(marker) {
    const file = process.env.PEER_EVENTS_FILE;
    if (!file || !existsSync(file)) return false;
    return readFileSync(file, 'utf8').split('\n').includes(marker);
}

async function waitMarker(marker, timeoutMs) {
    // Another process writes the file: polling with a short pause, bounded, is the only way.
    const deadline = performance.now() + timeoutMs;
    while (!markerPresent(marker)) {
        if (performance.now() > deadline) throw new Error(`marker ${JSON.stringify(marker)} not seen within ${timeoutMs} ms`);
        await new Promise(resolve => setTimeout(resolve, 10));
    }
}

const CHANGES = [
    'notifications/tools/list_changed',
    'notifications/prompts/list_changed',
    'notifications/resources/list_changed',
    'notifications/resources/updated'
];

async function listenStep(client, step, tag, opts) {
    let seen = 0;
    let wake = () => {};
    for (const method of CHANGES) {
        client.setNotificationHandler(method, notification => {
            emit('listen_event', { ...tag, method: notification.method, params: notification.params });
            seen += 1;
            wake();
        });
    }
    const sub = await client.listen(step.filter ?? {});
    emit('acknowledged', { ...tag, honored: sub.honoredFilter });
    const bound = new Promise((_, reject) =>
        setTimeout(() => reject(new Error(`listen: not done within ${opts.markerTimeoutMs} ms`)), opts.markerTimeoutMs).unref()
    );
    if (step.events) {
        await Promise.race([
            new Promise(resolve => {
                wake = () => seen >= step.events && resolve();
                wake();
            }),
            bound
        ]);
        await sub.close();
    }
    emit('listen_ended', { ...tag, how: await Promise.race([sub.closed, bound]) });
}

async function runStep(client, step, index, opts) {
    const tag = { step: index, op: step.op };
    try {
        if (step.op === 'discover') {
            emit('discover', { ...tag, result: await client.discover() });
        } else if (step.op === 'list') {
            const listed = await client.listTools();
            emit('tools', { ...tag, tools: listed.tools.map(t => t.name) });
        } else if (step.op === 'call') {
            emit('result', { ...tag, result: await client.callTool({ name: step.name, arguments: step.arguments ?? {} }) });
        } else if (step.op === 'cancel') {
            const controller = new AbortController();
            const call = client.callTool({ name: step.name, arguments: step.arguments ?? {} }, { signal: controller.signal });
            const settled = call.then(
                result => emit('result', { ...tag, result }),
                error => emit('error', { ...tag, ...errorFields(error) })
            );
            if (step.after_marker !== undefined) await waitMarker(step.after_marker, opts.markerTimeoutMs);
            await new Promise(resolve => setTimeout(resolve, step.after_ms ?? 0));
            controller.abort(new Error('cancelled by the test client'));
            emit('aborted', { ...tag, at_ms: elapsed() });
            await settled;
        } else if (step.op === 'listen') {
            await listenStep(client, step, tag, opts);
        } else if (step.op === 'wait_marker') {
            await waitMarker(step.marker, opts.markerTimeoutMs);
            emit('marker', { ...tag, marker: step.marker });
        } else {
            throw new Error(`unknown op ${step.op}`);
        }
        return true;
    } catch (error) {
        emit('error', { ...tag, ...errorFields(error) });
        return false;
    }
}

async function main() {
    const { opts, steps, command } = parseArgs(process.argv.slice(2));
    const capabilities = opts.elicitJson !== undefined || opts.elicitAction !== undefined ? { elicitation: { form: {} } } : {};
    const client = new Client(
        { name: 'ts-v2-client-2026', version: '2.4.0-peer' },
        { capabilities, versionNegotiation: versionNegotiation(opts.mode) }
    );
    if (capabilities.elicitation) {
        client.setRequestHandler('elicitation/create', async request => {
            emit('elicitation', { params: request.params });
            if (opts.elicitAction !== undefined && opts.elicitAction !== 'accept') return { action: opts.elicitAction };
            return { action: 'accept', content: opts.elicitJson ?? {} };
        });
    }
    let transport;
    if (opts.url !== undefined) {
        transport = new StreamableHTTPClientTransport(new URL(opts.url));
    } else {
        const forwarded = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('PEER_')));
        transport = new StdioClientTransport({
            command: command[0],
            args: command.slice(1),
            env: { ...getDefaultEnvironment(), ...forwarded, ...opts.env },
            stderr: 'inherit'
        });
    }
    let ok = true;
    try {
        await client.connect(tap(transport));
        const discover = client.getDiscoverResult();
        emit('connected', {
            protocolVersion: client.getNegotiatedProtocolVersion(),
            era: client.getProtocolEra(),
            serverInfo: client.getServerVersion(),
            supportedVersions: discover?.supportedVersions
        });
        for (const [index, step] of steps.entries()) ok = (await runStep(client, step, index, opts)) && ok;
    } catch (error) {
        ok = false;
        emit('error', { step: 'connect', ...errorFields(error) });
    } finally {
        await client.close().catch(() => {});
    }
    emit('done', { ok });
    process.exitCode = ok ? 0 : 1;
}

await main();

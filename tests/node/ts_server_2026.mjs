#!/usr/bin/env node
// An MCP server built with the TypeScript SDK v2 (@modelcontextprotocol/server), serving only
// protocol revision 2026-07-28: a 2025-era opening (`initialize`) is refused with -32022.
//
//     node ts_server_2026.mjs           stdio (serveStdio)
//     node ts_server_2026.mjs --http    Streamable HTTP (createMcpHandler, mounted on node:http
//                                       with @modelcontextprotocol/node) on a free loopback
//                                       port; prints "serving at http://127.0.0.1:PORT/mcp" on
//                                       stderr once it listens; each request adds the line
//                                       "HTTP <verb> <Mcp-Method header>" and "HTTP headers
//                                       <JSON of its Accept and Mcp-* headers>", and one whose
//                                       response the client closed before its end adds
//                                       "HTTP closed by the client <Mcp-Method header>"
//
// Tools:
//   echo {text}                 the text back
//   slow {seconds, tag?}        waits until the request is aborted or `seconds` pass; writes
//                               "STARTED slow <tag>", then "CANCELLED slow <tag>" (the handler's
//                               AbortSignal fired) or "FINISHED slow <tag>"
//   ask_name {question?}        multi round-trip: answers input_required with one form
//                               elicitation (key "name", {name: string}) and a signed
//                               requestState; on the retry returns "accept:<name> state:<step>"
//                               (or "<action>" when the elicitation was not accepted)
//
// Env:
//   PEER_EVENTS_FILE            optional path: the markers above are appended there (one per
//                               line, fsynced at once); they always go to stderr as well
import { appendFileSync, closeSync, fsyncSync, openSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';

import {
    acceptedContent,
    createRequestStateCodec,
    fromJsonSchema,
    inputRequired,
    inputResponse,
    createMcpHandler,
    McpServer
} from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { localhostHostValidation, localhostOriginValidation, toNodeHandler } from '@modelcontextprotocol/node';

const EVENTS_FILE = process.env.PEER_EVENTS_FILE;

function event(...parts) {
    const line = parts.filter(p => p !== undefined && p !== '').join(' ');
    process.stderr.write(`${line}\n`);
    if (!EVENTS_FILE) return;
    const fd = openSync(EVENTS_FILE, 'a');
    try {
        appendFileSync(fd, `${line}\n`);
        fsyncSync(fd);
    } finally {
        closeSync(fd);
    }
}

const nameSchema = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] };
const stateCodec = createRequestStateCodec({ key: randomBytes(32), ttlSeconds: 600 });

function buildServer({ era } = {}) {
    const server = new McpServer(
        { name: 'ts-v2-peer-2026', version: '2.4.0-peer' },
        { capabilities: { tools: {} }, requestState: { verify: stateCodec.verify } }
    );
    event('ERA', String(era));

    server.registerTool(
        'echo',
        { description: 'Echo the text back', inputSchema: fromJsonSchema({ type: 'object', properties: { text: { type: 'string' } }, required: ['text'] }) },
        async ({ text }) => ({ content: [{ type: 'text', text }] })
    );

    server.registerTool(
        'slow',
        {
            description: 'Wait until cancelled or `seconds` pass',
            inputSchema: fromJsonSchema({
                type: 'object',
                properties: { seconds: { type: 'number' }, tag: { type: 'string' } },
                required: ['seconds']
            })
        },
        async ({ seconds, tag = '' }, ctx) => {
            const signal = ctx.mcpReq.signal;
            event('STARTED slow', tag);
            const outcome = await new Promise(resolve => {
                if (signal.aborted) return resolve('aborted');
                const timer = setTimeout(() => resolve('finished'), seconds * 1000);
                signal.addEventListener(
                    'abort',
                    () => {
                        clearTimeout(timer);
                        resolve('aborted');
                    },
                    { once: true }
                );
            });
            if (outcome === 'aborted') {
                event('CANCELLED slow', tag);
                return { content: [{ type: 'text', text: `cancelled ${tag}` }], isError: true };
            }
            event('FINISHED slow', tag);
            return { content: [{ type: 'text', text: `slept ${seconds}` }] };
        }
    );

    server.registerTool(
        'ask_name',
        {
            description: 'Ask the user for a name (input_required with a form elicitation)',
            inputSchema: fromJsonSchema({ type: 'object', properties: { question: { type: 'string' } } })
        },
        async ({ question = 'Your name?' }, ctx) => {
            const view = inputResponse(ctx.mcpReq.inputResponses, 'name');
            if (view.kind === 'elicit' && view.action !== 'accept') {
                return { content: [{ type: 'text', text: view.action }] };
            }
            const answer = acceptedContent(ctx.mcpReq.inputResponses, 'name');
            if (answer === undefined || typeof answer.name !== 'string') {
                return inputRequired({
                    inputRequests: { name: inputRequired.elicit({ message: question, requestedSchema: nameSchema }) },
                    requestState: await stateCodec.mint({ step: 'asked' })
                });
            }
            const state = ctx.mcpReq.requestState();
            return { content: [{ type: 'text', text: `accept:${answer.name} state:${state?.step}` }] };
        }
    );
    return server;
}

function serveHttp() {
    const handler = toNodeHandler(createMcpHandler(buildServer, { legacy: 'reject' }));
    const validateHost = localhostHostValidation();
    const validateOrigin = localhostOriginValidation();
    const server = createServer((req, res) => {
        if (req.url !== '/mcp') {
            res.writeHead(404).end();
            return;
        }
        if (!validateHost(req, res) || !validateOrigin(req, res)) return;
        const method = req.headers['mcp-method'] ?? '-';
        event('HTTP', req.method, method);
        const routing = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k.startsWith('mcp-') || k === 'accept'));
        event('HTTP headers', JSON.stringify(routing));
        res.on('close', () => {
            if (!res.writableFinished) event('HTTP closed by the client', method);
        });
        void handler(req, res);
    });
    server.listen(0, '127.0.0.1', () => event(`serving at http://127.0.0.1:${server.address().port}/mcp`));
    for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(0));
}

event(`ts-v2-peer-2026 starting pid=${process.pid}`);
if (process.argv[2] === '--http') serveHttp();
else serveStdio(buildServer, { legacy: 'reject' });

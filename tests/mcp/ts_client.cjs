// An independent MCP client for the `dsh mcp` tests: the TypeScript SDK over stdio, on Node 22.
//
// Usage: node ts_client.cjs REQUEST_JSON, where REQUEST_JSON names the server command
// ({"command", "args", "env"}), the references to read and a reference that must fail. It
// prints one JSON object of what the client saw. The SDK is found through NODE_PATH (its
// node_modules folder), as `require` resolves it.
"use strict";

const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { McpError } = require("@modelcontextprotocol/sdk/types.js");

async function errorOf(promise) {
  try {
    await promise;
  } catch (error) {
    if (error instanceof McpError) {
      return { code: error.code, data: error.data ?? null };
    }
    throw error;
  }
  return null;
}

async function main() {
  const request = JSON.parse(process.argv[2]);
  const transport = new StdioClientTransport({
    command: request.command,
    args: request.args,
    env: request.env,
    stderr: "inherit",
  });
  const client = new Client({ name: "dsh-tests-ts", version: "1.0.0" });
  await client.connect(transport);
  const out = {
    server: client.getServerVersion(),
    instructions: client.getInstructions() ?? null,
  };

  const tools = await client.listTools();
  out.tools = tools.tools.map((tool) => ({
    name: tool.name,
    readOnly: tool.annotations?.readOnlyHint ?? null,
    required: tool.inputSchema.required ?? [],
    hasOutputSchema: Boolean(tool.outputSchema),
  }));

  const search = await client.callTool({ name: "search_sessions", arguments: { query: request.query } });
  out.search = { isError: search.isError ?? false, sessions: search.structuredContent.sessions };

  const read = await client.callTool({ name: "read_sessions", arguments: { references: request.references } });
  out.read = { isError: read.isError ?? false, text: read.content[0].text, sources: read.structuredContent.sources };

  const failed = await client.callTool({ name: "read_sessions", arguments: { references: [request.failing] } });
  out.failed = { isError: failed.isError ?? false, text: failed.content[0].text };

  out.unknownTool = await errorOf(client.callTool({ name: "no_such_tool", arguments: {} }));

  const pages = [];
  let cursor;
  do {
    const page = await client.listResources(cursor === undefined ? {} : { cursor });
    pages.push(page.resources.map((resource) => ({ uri: resource.uri, name: resource.name })));
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  out.pages = pages;

  const resource = await client.readResource({ uri: pages[0][0].uri });
  out.resource = resource.contents[0];
  out.unknownResource = await errorOf(client.readResource({ uri: "dsh-session:bm8" }));

  await client.close();
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((error) => {
  process.stderr.write(`ts_client: ${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});

// Command berm is the OS for agent harnesses: it deploys WebAssembly programs,
// runs their tools and serves them over MCP. See README.md.
//
// Run under the name bermd (a link to it or a copy), berm is berm serve.
package main

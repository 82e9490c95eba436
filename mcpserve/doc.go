// Package mcpserve serves every program deployed in a berm root on one MCP
// endpoint, each tool named {program}_{tool}, over stdio or streamable HTTP,
// and mounts the control API (internal/control) that remote deploys use.
//
//	// programs is a Programs: berm's deployment service (internal/mcpservice
//	// adapts it), or an embedder's own.
//	srv := mcpserve.New(programs, &mcpserve.Options{Logger: logger})
//	if err := srv.Start(ctx); err != nil { // tools listed from manifests at once;
//		return err                         // deploys elsewhere show within a second
//	}
//	defer srv.Close(ctx) // every goroutine stopped; close the runtime after
//	err := srv.RunStdio(ctx, os.Stdin, os.Stdout, drain)
//
// A call runs through the runtime; its outcome maps onto MCP as ABI.md says:
// the program's result is text content (and structured content when it is a
// JSON object; bytes that are not UTF-8 an embedded binary resource), the
// program's failure and refused arguments are results with isError, and
// every other host error is a JSON-RPC error (CodeTrap, CodeDeadline, ...).
//
// Over HTTP it answers three probes without the token: /livez (the process
// answers), /readyz (it takes calls: programs loaded, not draining, whatever
// the state) and /healthz (/readyz, and the state reachable: CheckState).
// Hold answers them before the Server exists, while berm serve waits for
// its database.
package mcpserve

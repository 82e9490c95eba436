// Package service owns berm's deployments: it checks an image and records it
// in the store, lists, inspects and removes what is deployed, calls a
// program, runs an image as a throwaway deployment with its callees, and
// keeps a runtime in line with the store, with the goroutines that do so.
// Every front end (the command line, the control API, the MCP server) goes
// through it, so that a name is checked, an image refused and a change
// served one way.
//
//	svc := service.New(rt, st, &service.Options{Check: mcpserve.Checker(naming)})
//	info, err := svc.Deploy(ctx, "hello", image, "hello.wasm", nil)
//	err = svc.Start(ctx, func(c service.Change) { ... }) // serve what the store holds
//	defer svc.Close(ctx)
//	out, err := svc.Call(ctx, "hello", "greet", args) // once compiled and installed
package service

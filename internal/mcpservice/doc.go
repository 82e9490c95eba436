// Package mcpservice is berm's deployment service as the MCP adapter sees
// it: it adapts *service.Service to mcpserve.Programs, so that mcpserve
// depends on an interface of its own and the service on no MCP.
//
//	svc := service.New(rt, st, &service.Options{Check: mcpserve.Checker(naming)})
//	srv := mcpserve.New(mcpservice.New(svc), &mcpserve.Options{Logger: logger})
package mcpservice

// Package control is berm serve's control API, which `berm
// deploy|ls|rm|inspect --server URL` drive: its handler (Handler, which
// mcpserve mounts under /v1/programs), its client, and the wire types they
// share (Info, Details, ErrorBody, SearchResponse).
//
//	srv := control.Handler(svc, control.ServerOptions{TakesGrants: token != ""})
//	c, err := control.NewClient("http://127.0.0.1:7777", token)
//	info, err := c.Deploy(ctx, "echo", image, "echo.wasm", nil)
package control

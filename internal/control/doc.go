// Package control is the client of berm serve's control API, which
// `berm deploy|ls|rm|inspect --server URL` drive, and the wire types it
// shares with the server (mcpserve).
//
//	c, err := control.NewClient("http://127.0.0.1:7777", token)
//	info, err := c.Deploy(ctx, "echo", image, "echo.wasm")
package control

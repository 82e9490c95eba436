package mcpserve

import (
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Methods berm looks at.
const (
	methodInitialize  = "initialize"
	methodInitialized = "notifications/initialized"
	methodCancelled   = "notifications/cancelled"
	methodSetLevel    = "logging/setLevel"
	methodToolsCall   = "tools/call"
)

// sdkMethod is how the SDK's server takes a method it receives.
type sdkMethod struct {
	notification bool // sent without an id
	noParams     bool // params may be absent
}

// sdkMethods are the methods the SDK's server receives: go-sdk v1.8.0,
// mcp/server.go, serverMethodInfos, which it keeps unexported. Over stdio
// the SDK answers a request outside them in JSON-RPC (-32601); over HTTP
// its servePOST checks every message against them first (checkRequest) and
// answers a miss with a plain-text HTTP 400, which an MCP client reports as
// a failed POST rather than the error it is. So berm checks a POST as
// checkRequest does and answers as stdio does (postCheck). A test
// (TestSDKMethods) holds this table to the SDK's: drop it once the SDK
// answers in JSON-RPC over HTTP too.
var sdkMethods = map[string]sdkMethod{
	"completion/complete":              {},
	"server/discover":                  {noParams: true},
	methodInitialize:                   {},
	"ping":                             {noParams: true},
	"prompts/list":                     {noParams: true},
	"prompts/get":                      {},
	"tools/list":                       {noParams: true},
	"tools/call":                       {},
	"resources/list":                   {noParams: true},
	"resources/templates/list":         {noParams: true},
	"resources/read":                   {},
	methodSetLevel:                     {},
	"resources/subscribe":              {},
	"subscriptions/listen":             {},
	"resources/unsubscribe":            {},
	methodCancelled:                    {notification: true, noParams: true},
	methodInitialized:                  {notification: true, noParams: true},
	"notifications/roots/list_changed": {notification: true, noParams: true},
	"notifications/progress":           {notification: true},
}

// checkMethod is the SDK's checkRequest (go-sdk v1.8.0, mcp/shared.go) with
// the error the SDK answers it with over stdio, where its jsonrpc2
// connection writes the error of a call and drops that of a notification.
// It returns nil when the SDK takes the request. A notification berm should
// drop, as stdio does, gets drop true.
func checkMethod(req *jsonrpc.Request) (e *jsonrpc.Error, drop bool) {
	m, ok := sdkMethods[req.Method]
	switch {
	case !ok && !req.IsCall():
		return nil, true // an unknown notification: JSON-RPC has it ignored
	case !ok:
		return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method not found: %q", req.Method)}, false
	case m.notification && req.IsCall():
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("invalid request: unexpected id for %q", req.Method)}, false
	case !m.notification && !req.IsCall():
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("invalid request: missing id for %q", req.Method)}, false
	case !m.noParams && len(req.Params) == 0:
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: `invalid request: missing required "params"`}, false
	}
	return nil, false
}

;; test: the tools the MCP conformance suite's server scenarios call, served
;; as test_{tool} (program "test"). Each does what its scenario asks in the
;; one way a berm program can: a text result, a failure, log lines, or bytes
;; that are not UTF-8 (which berm sends as an embedded resource). The
;; scenarios that need what no berm program can do (images, progress,
;; sampling, ...) have no tool here: expected-failures.yml says why.
(module
  (import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "This is a simple text response for testing.")               ;; 43
  (data (i32.const 64) "This tool intentionally returns an error for testing")     ;; 52
  (data (i32.const 128) "Tool execution started")                                  ;; 22
  (data (i32.const 160) "Tool processing data")                                    ;; 20
  (data (i32.const 192) "Tool execution completed")                                ;; 24
  (data (i32.const 224) "Tool with logging executed successfully")                 ;; 39
  ;; 0xff is never UTF-8: the result goes as a binary embedded resource.
  (data (i32.const 288) "\ffThis is an embedded resource content.")                ;; 38
  (data (i32.const 352) "Reconnection test completed successfully")                ;; 40

  ;; tools-call-simple-text: berm.result
  (func (export "berm_tool_simple_text")
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 0) (i32.const 43))))

  ;; tools-call-error: berm.fail, which MCP sees as isError with the message
  (func (export "berm_tool_error_handling")
    (drop (call $sys (i64.const 0x71ea7deedc66e725) (i32.const 64) (i32.const 52))))

  ;; tools-call-with-logging: three berm.log lines, each an MCP log message
  ;; to the client that asked for logs, then a result
  (func (export "berm_tool_tool_with_logging")
    (drop (call $sys (i64.const 0x718e2c830194e059) (i32.const 128) (i32.const 22)))
    (drop (call $sys (i64.const 0x718e2c830194e059) (i32.const 160) (i32.const 20)))
    (drop (call $sys (i64.const 0x718e2c830194e059) (i32.const 192) (i32.const 24)))
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 224) (i32.const 39))))

  ;; tools-call-embedded-resource: a result that is not UTF-8
  (func (export "berm_tool_embedded_resource")
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 288) (i32.const 38))))

  ;; server-sse-polling: the scenario wants the server to close the call's
  ;; stream before the result and resend it when the client reconnects; that
  ;; is the transport's (SEP-1699), which a program cannot ask for, so this
  ;; only answers, so that the scenario sees a result rather than an unknown
  ;; tool
  (func (export "berm_tool_reconnection")
    (drop (call $sys (i64.const 0x83ad05f161e950ac) (i32.const 352) (i32.const 40)))))

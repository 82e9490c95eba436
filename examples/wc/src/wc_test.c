/*
 * The tools of wc.c natively, under sdk/c's fake host:
 *
 *     cc -std=c11 -Wall -I ../../../sdk/c -o /tmp/wc_test wc_test.c && /tmp/wc_test
 *
 * (wasm_test.go runs it when cc is installed, then the image in the real
 * runtime.)
 */
#include "berm_fake.h"
#include "wc.c"

int main(void) {
	berm_fake_run(berm_tool_count, "{\"text\":\"one two  three\\nfour\\n\\u00e9t\\u00e9\"}");
	BERM_EXPECT(!berm_fake.failed);
	BERM_EXPECT(berm_fake_result_is("{\"lines\":3,\"words\":5,\"chars\":23,\"bytes\":25}"));

	berm_fake_run(berm_tool_count, "{\"text\":\"\"}");
	BERM_EXPECT(berm_fake_result_is("{\"lines\":0,\"words\":0,\"chars\":0,\"bytes\":0}"));

	berm_fake_run(berm_tool_count, "{}");
	BERM_EXPECT(berm_fake.failed && strcmp(berm_fake.failure.data, "text: a string is required") == 0);

	const char *text = "{\"text\":\"Alpha\\nbeta ALPHA\\r\\ngamma\\nalphabet \\\"quoted\\\"\", \"query\":\"alpha\"";
	char args[256];

	snprintf(args, sizeof args, "%s}", text);
	berm_fake_run(berm_tool_search, args);
	BERM_EXPECT(berm_fake_result_is(
		"{\"matches\":[{\"line\":4,\"text\":\"alphabet \\\"quoted\\\"\"}],\"count\":1,\"truncated\":false}"));

	snprintf(args, sizeof args, "%s, \"ignore_case\": true, \"max\": 2}", text);
	berm_fake_run(berm_tool_search, args);
	BERM_EXPECT(berm_fake_result_is(
		"{\"matches\":[{\"line\":1,\"text\":\"Alpha\"},{\"line\":2,\"text\":\"beta ALPHA\"}],\"count\":3,\"truncated\":true}"));

	berm_fake_run(berm_tool_search, "{\"text\":\"x\",\"query\":\"\"}");
	BERM_EXPECT(berm_fake.failed);

	berm_fake_run(berm_tool_search, "{\"text\":\"x\",\"query\":\"y\"}");
	BERM_EXPECT(berm_fake_result_is("{\"matches\":[],\"count\":0,\"truncated\":false}"));

	return berm_fake_report();
}

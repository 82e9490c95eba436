/*
 * wc: counts and searches text given in the arguments. berm's example of a
 * program in C: freestanding (no libc), built with clang for wasm32 and
 * sdk/c/berm.h. See build.sh and examples/README.md.
 */
#include "berm.h"

static int is_space(unsigned char c) {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static unsigned char lower(unsigned char c) {
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/* text reads the text member of the arguments, failing the call without. */
static int text(berm_bytes args, berm_bytes *out) {
	if (!berm_json_string(args.data, args.len, "text", out)) {
		berm_fail_str("text: a string is required");
		return 0;
	}
	return 1;
}

/* count: {"text": "..."} -> {"lines": n, "words": n, "chars": n, "bytes": n} */
BERM_TOOL(count) {
	berm_bytes args = berm_args(), t;
	if (!text(args, &t))
		return;
	int64_t lines = 0, words = 0, chars = 0;
	int in_word = 0;
	for (size_t i = 0; i < t.len; i++) {
		unsigned char c = (unsigned char)t.data[i];
		if (c == '\n')
			lines++;
		if ((c & 0xc0) != 0x80)
			chars++;
		if (is_space(c)) {
			in_word = 0;
		} else if (!in_word) {
			in_word = 1;
			words++;
		}
	}
	if (t.len > 0 && t.data[t.len - 1] != '\n')
		lines++; /* a last line without its newline is a line */
	berm_buf out = {0};
	berm_buf_str(&out, "{\"lines\":");
	berm_buf_int(&out, lines);
	berm_buf_str(&out, ",\"words\":");
	berm_buf_int(&out, words);
	berm_buf_str(&out, ",\"chars\":");
	berm_buf_int(&out, chars);
	berm_buf_str(&out, ",\"bytes\":");
	berm_buf_int(&out, (int64_t)t.len);
	berm_buf_str(&out, "}");
	berm_result(out.data, out.len);
}

static int contains(const char *line, size_t n, berm_bytes q, int fold) {
	if (q.len > n)
		return 0;
	for (size_t i = 0; i + q.len <= n; i++) {
		size_t k = 0;
		while (k < q.len && (fold ? lower((unsigned char)line[i + k]) == lower((unsigned char)q.data[k])
		                          : line[i + k] == q.data[k]))
			k++;
		if (k == q.len)
			return 1;
	}
	return 0;
}

/* search: {"text": "...", "query": "...", "ignore_case": false, "max": 100}
 * -> {"count": n, "matches": [{"line": 1, "text": "..."}], "truncated": false} */
BERM_TOOL(search) {
	berm_bytes args = berm_args(), t, q;
	if (!text(args, &t))
		return;
	if (!berm_json_string(args.data, args.len, "query", &q) || q.len == 0) {
		berm_fail_str("query: a non-empty string is required");
		return;
	}
	int fold = 0;
	berm_json_bool(args.data, args.len, "ignore_case", &fold);
	int64_t max = 100;
	berm_json_int(args.data, args.len, "max", &max);
	if (max < 1) {
		berm_fail_str("max: at least 1");
		return;
	}
	berm_buf out = {0};
	berm_buf_str(&out, "{\"matches\":[");
	int64_t count = 0, line = 0;
	size_t start = 0;
	while (start < t.len) {
		size_t end = start;
		while (end < t.len && t.data[end] != '\n')
			end++;
		line++;
		size_t n = end - start;
		if (n > 0 && t.data[start + n - 1] == '\r')
			n--;
		if (contains(t.data + start, n, q, fold)) {
			if (count < max) {
				if (count > 0)
					berm_buf_byte(&out, ',');
				berm_buf_str(&out, "{\"line\":");
				berm_buf_int(&out, line);
				berm_buf_str(&out, ",\"text\":");
				berm_buf_json_string(&out, t.data + start, n);
				berm_buf_byte(&out, '}');
			}
			count++;
		}
		start = end + 1;
	}
	berm_buf_str(&out, "],\"count\":");
	berm_buf_int(&out, count);
	berm_buf_str(&out, count > max ? ",\"truncated\":true}" : ",\"truncated\":false}");
	berm_result(out.data, out.len);
}

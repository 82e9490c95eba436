/*
 * berm_fake.h: a fake berm host, so that a program's tools run natively
 * under a plain C test, compiled with the system's cc and libc:
 *
 *     #include "berm_fake.h"
 *     #include "greet.c"   // the program, tools and all
 *
 *     int main(void) {
 *         berm_fake_run(berm_tool_greet, "{\"name\":\"Ada\"}");
 *         BERM_EXPECT(!berm_fake.failed && berm_fake_result_is("Hello, Ada!"));
 *         return berm_fake_report();
 *     }
 *
 *     cc -std=c11 -I path/to/sdk/c -o greet_test greet_test.c && ./greet_test
 *
 * It defines berm_syscall, so include it in one translation unit only. It
 * links every syscall, declared or not, and checks no schema. The store
 * outlives runs, as a program's does; berm_fake_reset clears it.
 */
#ifndef BERM_FAKE_H
#define BERM_FAKE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "berm.h"

#define BERM_FAKE_MAX_KEYS 256
#define BERM_FAKE_MAX_LOGS 256

typedef struct {
	/* The call's input: args (NULL stands for {}); now_ms, when not 0, is
	 * what berm.now returns. */
	const char *args;
	int64_t now_ms;
	/* call, when set, answers berm.call: it sets *out and returns the
	 * outcome (BERM_FAILED for the callee's failure, BERM_REFUSED for the
	 * host's). Unset refuses every call. */
	berm_status (*call)(const char *program, const char *tool, berm_bytes args, berm_bytes *out);
	/* http, when set, answers berm.http with status, headers and body, or
	 * BERM_REFUSED and a message in *body. Unset refuses every request, as
	 * a deployment that grants no host does. */
	berm_status (*http)(berm_bytes method, berm_bytes url, berm_bytes headers, berm_bytes body,
	                    int *status, berm_bytes *resp_headers, berm_bytes *resp_body);

	/* The outcome of the last run. */
	berm_bytes result;
	int failed;
	berm_bytes failure;
	berm_bytes logs[BERM_FAKE_MAX_LOGS];
	int nlogs;

	/* The program's store. */
	berm_bytes keys[BERM_FAKE_MAX_KEYS], values[BERM_FAKE_MAX_KEYS];
	int nkeys;

	berm_bytes staged;
	int checks, failures;
} berm_fake_host;

static berm_fake_host berm_fake;

static inline berm_bytes berm_fake__copy(const void *p, size_t n) {
	berm_bytes b;
	b.data = (char *)malloc(n + 1);
	if (n)
		memcpy(b.data, p, n);
	b.data[n] = 0;
	b.len = n;
	return b;
}

static inline uint64_t berm_fake__stage(berm_bytes b) {
	berm_fake.staged = b;
	return b.len;
}

static inline int berm_fake__unframe(const void *p, uint32_t n, berm_bytes *fields, int want) {
	berm_bytes whole = berm_fake__copy(p, n);
	if (!berm_unframe(whole, fields, want)) {
		fprintf(stderr, "berm_fake: malformed frame: a host traps\n");
		abort();
	}
	return 1;
}

static inline int berm_fake__find(const void *key, size_t n) {
	for (int i = 0; i < berm_fake.nkeys; i++)
		if (berm_fake.keys[i].len == n && memcmp(berm_fake.keys[i].data, key, n) == 0)
			return i;
	return -1;
}

uint64_t berm_syscall(uint64_t number, const void *ptr, uint32_t len) {
	const char *args = berm_fake.args ? berm_fake.args : "{}";
	switch (number) {
	case BERM_SYS_ARGS_LEN:
		return strlen(args);
	case BERM_SYS_ARGS_READ: {
		size_t n = strlen(args);
		memcpy((void *)ptr, args, len < n ? len : n);
		return n;
	}
	case BERM_SYS_RESULT:
		berm_fake.result = berm_fake__copy(ptr, len);
		return 0;
	case BERM_SYS_FAIL:
		berm_fake.failed = 1;
		berm_fake.failure = berm_fake__copy(ptr, len);
		return 0;
	case BERM_SYS_LOG:
		if (berm_fake.nlogs < BERM_FAKE_MAX_LOGS)
			berm_fake.logs[berm_fake.nlogs++] = berm_fake__copy(ptr, len);
		return 0;
	case BERM_SYS_RESULT_READ: {
		size_t n = berm_fake.staged.len;
		memcpy((void *)ptr, berm_fake.staged.data, len < n ? len : n);
		return n;
	}
	case BERM_SYS_NOW:
		return berm_fake.now_ms ? (uint64_t)berm_fake.now_ms : (uint64_t)1767225600000LL;
	case BERM_SYS_GET: {
		int i = berm_fake__find(ptr, len);
		if (i < 0)
			return berm_fake__stage(berm_fake__copy("", 0)) | BERM_ERROR_BIT;
		return berm_fake__stage(berm_fake.values[i]);
	}
	case BERM_SYS_SET: {
		berm_bytes f[2];
		berm_fake__unframe(ptr, len, f, 2);
		int i = berm_fake__find(f[0].data, f[0].len);
		if (i < 0) {
			if (berm_fake.nkeys == BERM_FAKE_MAX_KEYS) {
				const char *m = "berm.set: refused: the store would exceed its quota";
				return berm_fake__stage(berm_fake__copy(m, strlen(m))) | BERM_ERROR_BIT | BERM_HOST_BIT;
			}
			i = berm_fake.nkeys++;
			berm_fake.keys[i] = f[0];
		}
		berm_fake.values[i] = berm_fake__copy(f[1].data, f[1].len);
		return 0;
	}
	case BERM_SYS_DELETE: {
		int i = berm_fake__find(ptr, len);
		if (i >= 0) {
			berm_fake.nkeys--;
			berm_fake.keys[i] = berm_fake.keys[berm_fake.nkeys];
			berm_fake.values[i] = berm_fake.values[berm_fake.nkeys];
		}
		return 0;
	}
	case BERM_SYS_CALL: {
		berm_bytes f[3], out = {0, 0};
		berm_fake__unframe(ptr, len, f, 3);
		if (!berm_fake.call) {
			const char *m = "berm.call: refused: no such program or tool";
			return berm_fake__stage(berm_fake__copy(m, strlen(m))) | BERM_ERROR_BIT | BERM_HOST_BIT;
		}
		berm_status s = berm_fake.call(f[0].data, f[1].data, f[2], &out);
		uint64_t v = berm_fake__stage(berm_fake__copy(out.data, out.len));
		if (s == BERM_FAILED)
			v |= BERM_ERROR_BIT;
		if (s == BERM_REFUSED)
			v |= BERM_ERROR_BIT | BERM_HOST_BIT;
		return v;
	}
	case BERM_SYS_HTTP: {
		berm_bytes f[4], headers = {0, 0}, body = {0, 0};
		int status = 0;
		berm_fake__unframe(ptr, len, f, 4);
		berm_status s = BERM_REFUSED;
		if (berm_fake.http)
			s = berm_fake.http(f[0], f[1], f[2], f[3], &status, &headers, &body);
		else
			body = berm_fake__copy("berm.http: refused: the host is not granted", 43);
		if (s != BERM_OK)
			return berm_fake__stage(berm_fake__copy(body.data, body.len)) | BERM_ERROR_BIT | BERM_HOST_BIT;
		char code[16];
		int n = snprintf(code, sizeof code, "%d", status);
		berm_bytes parts[3] = {{code, (size_t)n}, headers, body};
		berm_bytes framed = berm_frame(parts, 3);
		return berm_fake__stage(berm_fake__copy(framed.data, framed.len));
	}
	}
	fprintf(stderr, "berm_fake: syscall 0x%llx: nothing is registered for it\n", (unsigned long long)number);
	abort();
}

/* berm_fake_run runs tool as one call with args (NULL for {}), clearing the
 * outcome of the previous run and keeping the store. */
static inline void berm_fake_run(void (*tool)(void), const char *args) {
	berm_fake.args = args;
	berm_fake.result = berm_fake__copy("", 0);
	berm_fake.failed = 0;
	berm_fake.failure = berm_fake__copy("", 0);
	berm_fake.nlogs = 0;
	berm_fake.staged = berm_fake__copy("", 0);
	tool();
}

/* berm_fake_result_is tells whether the last run's result is s. */
static inline int berm_fake_result_is(const char *s) {
	return berm_fake.result.len == strlen(s) && memcmp(berm_fake.result.data, s, berm_fake.result.len) == 0;
}

/* berm_fake_result_has tells whether the last run's result holds s. */
static inline int berm_fake_result_has(const char *s) {
	return strstr(berm_fake.result.data, s) != NULL;
}

/* BERM_EXPECT counts a check, and prints it with the last outcome when it
 * does not hold. */
#define BERM_EXPECT(cond) berm_fake__expect((cond), #cond, __FILE__, __LINE__)

static inline void berm_fake__expect(int ok, const char *what, const char *file, int line) {
	berm_fake.checks++;
	if (ok)
		return;
	berm_fake.failures++;
	fprintf(stderr, "%s:%d: %s does not hold (result %s, failure %s)\n", file, line, what,
	        berm_fake.result.data ? berm_fake.result.data : "", berm_fake.failed ? berm_fake.failure.data : "none");
}

/* berm_fake_report prints the tally and returns main's exit code. */
static inline int berm_fake_report(void) {
	if (berm_fake.failures) {
		fprintf(stderr, "FAIL: %d of %d checks\n", berm_fake.failures, berm_fake.checks);
		return 1;
	}
	printf("ok: %d checks\n", berm_fake.checks);
	return 0;
}

/* berm_fake_reset clears the store and the callbacks. */
static inline void berm_fake_reset(void) { memset(&berm_fake, 0, sizeof berm_fake); }

#endif /* BERM_FAKE_H */

/*
 * berm.h: the berm program ABI (ABI.md, version 0) for C, in one header.
 *
 * A tool is a function exported as berm_tool_<name>, of type void(void):
 *
 *     #include "berm.h"
 *
 *     BERM_TOOL(greet) {
 *         berm_bytes args = berm_args();
 *         berm_bytes name;
 *         if (!berm_json_string(args.data, args.len, "name", &name) || name.len == 0) {
 *             berm_fail_str("name is empty");
 *             return;
 *         }
 *         berm_buf out = {0};
 *         berm_buf_str(&out, "Hello, ");
 *         berm_buf_put(&out, name.data, name.len);
 *         berm_buf_str(&out, "!");
 *         berm_result(out.data, out.len);
 *     }
 *
 * Build it freestanding (no libc; clang and lld from Debian):
 *
 *     clang --target=wasm32 -std=c11 -O2 -mbulk-memory -nostdlib \
 *         -Wl,--no-entry -I path/to/sdk/c -o raw.wasm greet.c
 *
 * and attach the manifest (a .berm.abi custom section) to make the image.
 * wasm-ld exports the memory by itself, and BERM_TOOL exports the tool.
 * -mbulk-memory makes the copies and fills clang emits (struct copies,
 * loops it recognizes, __builtin_memcpy) the memory.copy and memory.fill
 * instructions, since there is no libc to call memcpy in. The header also
 * works against wasi-libc (--target=wasm32-wasi), and natively, where a test
 * defines berm_syscall itself (berm_fake.h does).
 *
 * Memory: berm_alloc hands out memory that is never freed. An instance lives
 * for one call (ABI.md, One call), so this is the whole of memory management
 * for most tools: it bumps a pointer from __heap_base and grows the memory
 * when it must. It traps when the host's memory limit is reached, as Go's
 * runtime does; berm_try_alloc returns NULL instead. Against wasi-libc and
 * natively, it is malloc.
 *
 * Every berm_bytes this header returns is NUL-terminated (one byte past len),
 * so that text can go straight to functions that want a C string; the bytes
 * themselves may hold NULs.
 *
 * Nothing here may run during _initialize, which freestanding C does not
 * have anyway; against wasi-libc, keep the syscalls out of constructors.
 */
#ifndef BERM_H
#define BERM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Numbers of the syscalls: the 64-bit FNV-1a hash of each name (ABI.md,
 * Syscalls). */
#define BERM_SYS_ARGS_LEN    0x6ee73f4eae1c1535ULL /* berm.args.len */
#define BERM_SYS_ARGS_READ   0x4d9b428e492faf86ULL /* berm.args.read */
#define BERM_SYS_RESULT      0x83ad05f161e950acULL /* berm.result */
#define BERM_SYS_FAIL        0x71ea7deedc66e725ULL /* berm.fail */
#define BERM_SYS_LOG         0x718e2c830194e059ULL /* berm.log */
#define BERM_SYS_CALL        0x6410f207e9992ec1ULL /* berm.call */
#define BERM_SYS_RESULT_READ 0x6c92a7d946a830beULL /* berm.result.read */
/* The berm binary's host syscalls: a program declares those it calls in its
 * manifest's "syscalls" (berm.toml's syscalls). */
#define BERM_SYS_NOW    0x83918e830bfa80dfULL /* berm.now */
#define BERM_SYS_GET    0xbda7ac832c28873fULL /* berm.get */
#define BERM_SYS_SET    0x585dd082f38a6e6bULL /* berm.set */
#define BERM_SYS_DELETE 0x84a8776bcc70bc72ULL /* berm.delete */
#define BERM_SYS_HTTP   0xcd342abaa2542f6dULL /* berm.http */

/* Bits of a staging syscall's return value: BERM_ERROR_BIT marks the staged
 * bytes as an error message, BERM_ERROR_BIT|BERM_HOST_BIT as the host's
 * refusal; the other bits are the length of the staged bytes. */
#define BERM_ERROR_BIT   (1ULL << 63)
#define BERM_HOST_BIT    (1ULL << 62)
#define BERM_LENGTH_MASK (BERM_HOST_BIT - 1)

/* berm_syscall is the ABI's one import, berm.syscall(i64, i32, i32) -> i64.
 * Off WebAssembly, a test defines it (see berm_fake.h). */
#ifdef __wasm__
__attribute__((import_module("berm"), import_name("syscall")))
#endif
uint64_t berm_syscall(uint64_t number, const void *ptr, uint32_t len);

/* BERM_TOOL(name) { ... } defines the tool `name`, exported as
 * berm_tool_<name>; the name must match the manifest's. */
#ifdef __wasm__
#define BERM__EXPORT(s) __attribute__((export_name(s)))
#else
#define BERM__EXPORT(s)
#endif
#define BERM_TOOL(name) \
	BERM__EXPORT("berm_tool_" #name) void berm_tool_##name(void); \
	void berm_tool_##name(void)

/* Outcome of a syscall that can fail: BERM_FAILED is the callee's own
 * failure (berm.call), BERM_REFUSED the host's refusal (bits 63+62). */
typedef enum {
	BERM_OK = 0,
	BERM_FAILED = 1,
	BERM_REFUSED = 2
} berm_status;

/* Bytes, NUL-terminated at data[len]. */
typedef struct {
	char *data;
	size_t len;
} berm_bytes;

/* ---- memory ---- */

#if defined(__wasm__) && !defined(__wasi__)
extern unsigned char __heap_base;
/* The top of the bump heap: weak, so that every translation unit that
 * includes this header shares one. */
__attribute__((weak)) uintptr_t berm__heap_top;

static inline void *berm_try_alloc(size_t n) {
	uintptr_t p = berm__heap_top;
	if (p == 0)
		p = (uintptr_t)&__heap_base;
	p = (p + 15) & ~(uintptr_t)15;
	if (n > SIZE_MAX - p)
		return NULL;
	uintptr_t end = p + n;
	uintptr_t have = (uintptr_t)__builtin_wasm_memory_size(0) * 65536;
	if (end > have) {
		size_t pages = (end - have + 65535) / 65536;
		if (__builtin_wasm_memory_grow(0, pages) == (size_t)-1)
			return NULL;
	}
	berm__heap_top = end;
	return (void *)p;
}
#else
#include <stdlib.h>
static inline void *berm_try_alloc(size_t n) { return malloc(n ? n : 1); }
#endif

/* berm_alloc returns n bytes that live until the call ends, or traps. */
static inline void *berm_alloc(size_t n) {
	void *p = berm_try_alloc(n);
	if (!p)
		__builtin_trap();
	return p;
}

static inline void berm_memcpy(void *dst, const void *src, size_t n) {
	if (n)
		__builtin_memcpy(dst, src, n);
}

static inline size_t berm_strlen(const char *s) {
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

static inline int berm_memeq(const void *a, const void *b, size_t n) {
	const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
	for (size_t i = 0; i < n; i++)
		if (x[i] != y[i])
			return 0;
	return 1;
}

/* berm_bytes_new returns n uninitialized bytes, NUL-terminated. */
static inline berm_bytes berm_bytes_new(size_t n) {
	berm_bytes b;
	b.data = (char *)berm_alloc(n + 1);
	b.data[n] = 0;
	b.len = n;
	return b;
}

/* ---- the call's arguments, result and failure ---- */

/* berm_args_len is the length of the arguments: a JSON object, UTF-8. */
static inline size_t berm_args_len(void) {
	return (size_t)berm_syscall(BERM_SYS_ARGS_LEN, 0, 0);
}

/* berm_args_read copies min(cap, length) bytes of the arguments to dst and
 * returns their full length. */
static inline size_t berm_args_read(void *dst, size_t cap) {
	return (size_t)berm_syscall(BERM_SYS_ARGS_READ, dst, (uint32_t)cap);
}

/* berm_args returns the arguments, byte for byte as the host received them
 * and checked them against the tool's parameters. */
static inline berm_bytes berm_args(void) {
	berm_bytes b = berm_bytes_new(berm_args_len());
	berm_args_read(b.data, b.len);
	return b;
}

/* berm_result sets the call's result; a later one replaces it, and a
 * berm_fail in the same call wins over it. */
static inline void berm_result(const void *p, size_t n) {
	berm_syscall(BERM_SYS_RESULT, p, (uint32_t)n);
}
static inline void berm_result_str(const char *s) { berm_result(s, berm_strlen(s)); }

/* berm_fail marks the call as the program's own failure with this message,
 * which the caller (on MCP, the model) sees. It does not stop the tool:
 * return after it. The last one of a call wins. */
static inline void berm_fail(const void *msg, size_t n) {
	berm_syscall(BERM_SYS_FAIL, msg, (uint32_t)n);
}
static inline void berm_fail_str(const char *s) { berm_fail(s, berm_strlen(s)); }

/* berm_log writes one line to the host's log of the program. */
static inline void berm_log(const void *line, size_t n) {
	berm_syscall(BERM_SYS_LOG, line, (uint32_t)n);
}
static inline void berm_log_str(const char *s) { berm_log(s, berm_strlen(s)); }

/* ---- staging and framing ---- */

/* berm_result_read copies min(cap, length) bytes staged by the last staging
 * syscall to dst and returns their full length. */
static inline size_t berm_result_read(void *dst, size_t cap) {
	return (size_t)berm_syscall(BERM_SYS_RESULT_READ, dst, (uint32_t)cap);
}

/* berm_staged copies out the bytes a staging syscall that returned v left on
 * the host. */
static inline berm_bytes berm_staged(uint64_t v) {
	berm_bytes b = berm_bytes_new((size_t)(v & BERM_LENGTH_MASK));
	if (b.len)
		berm_result_read(b.data, b.len);
	return b;
}

/* berm_status_of tells a staging return value's outcome. */
static inline berm_status berm_status_of(uint64_t v) {
	if ((v & (BERM_ERROR_BIT | BERM_HOST_BIT)) == (BERM_ERROR_BIT | BERM_HOST_BIT))
		return BERM_REFUSED;
	if (v & BERM_ERROR_BIT)
		return BERM_FAILED;
	return BERM_OK;
}

/* berm_frame encodes n fields as ABI.md's Framing says: each a little-endian
 * u32 length, then its bytes. */
static inline berm_bytes berm_frame(const berm_bytes *fields, int n) {
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += 4 + fields[i].len;
	berm_bytes b = berm_bytes_new(total);
	unsigned char *p = (unsigned char *)b.data;
	for (int i = 0; i < n; i++) {
		uint32_t len = (uint32_t)fields[i].len;
		p[0] = (unsigned char)len;
		p[1] = (unsigned char)(len >> 8);
		p[2] = (unsigned char)(len >> 16);
		p[3] = (unsigned char)(len >> 24);
		berm_memcpy(p + 4, fields[i].data, fields[i].len);
		p += 4 + fields[i].len;
	}
	return b;
}

/* berm_unframe splits a frame of exactly n fields in place, NUL-terminating
 * each (the frame must have one byte past its end, as every berm_bytes
 * does). It returns 0 when b is not such a frame. */
static inline int berm_unframe(berm_bytes b, berm_bytes *fields, int n) {
	size_t off = 0;
	int i = 0;
	for (; off < b.len; i++) {
		if (i == n || b.len - off < 4)
			return 0;
		const unsigned char *p = (const unsigned char *)b.data + off;
		size_t len = (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 | (size_t)p[3] << 24;
		if (len > b.len - off - 4)
			return 0;
		fields[i].data = b.data + off + 4;
		fields[i].len = len;
		off += 4 + len;
	}
	if (i != n)
		return 0;
	/* Each field ends where the next one's length begins, which has been
	 * read; the last ends at b.data[b.len]. */
	for (i = 0; i < n; i++)
		fields[i].data[fields[i].len] = 0;
	return 1;
}

static inline berm_bytes berm__cstr(const char *s) {
	berm_bytes b;
	b.data = (char *)s;
	b.len = s ? berm_strlen(s) : 0;
	return b;
}

/* ---- berm.call ---- */

/* berm_call runs the tool of another program, declared as "program.tool" in
 * the manifest's calls, with args (a JSON object). *out is the callee's
 * result (BERM_OK), its failure message (BERM_FAILED), or the host's message
 * (BERM_REFUSED: no such program or tool, not declared, the call depth or the
 * deadline ran out, the arguments were refused, or the callee trapped). */
static inline berm_status berm_call(const char *program, const char *tool,
                                    const void *args, size_t args_len, berm_bytes *out) {
	berm_bytes f[3] = {berm__cstr(program), berm__cstr(tool), {(char *)args, args_len}};
	berm_bytes in = berm_frame(f, 3);
	uint64_t v = berm_syscall(BERM_SYS_CALL, in.data, (uint32_t)in.len);
	berm_bytes staged = berm_staged(v);
	if (out)
		*out = staged;
	return berm_status_of(v);
}

/* ---- the program's key-value store (declare berm.get, berm.set,
 * berm.delete) ---- */

/* berm_get sets *value to the value under key and returns 1, or returns 0
 * when there is none. */
static inline int berm_get(const void *key, size_t key_len, berm_bytes *value) {
	uint64_t v = berm_syscall(BERM_SYS_GET, key, (uint32_t)key_len);
	if (v & BERM_ERROR_BIT)
		return 0;
	berm_bytes b = berm_staged(v);
	if (value)
		*value = b;
	return 1;
}
static inline int berm_get_str(const char *key, berm_bytes *value) {
	return berm_get(key, berm_strlen(key), value);
}

/* berm_set puts value under key. BERM_REFUSED is the host's refusal (a
 * quota), with its message in *refusal when refusal is not NULL. */
static inline berm_status berm_set(const void *key, size_t key_len,
                                   const void *value, size_t value_len, berm_bytes *refusal) {
	berm_bytes f[2] = {{(char *)key, key_len}, {(char *)value, value_len}};
	berm_bytes in = berm_frame(f, 2);
	uint64_t v = berm_syscall(BERM_SYS_SET, in.data, (uint32_t)in.len);
	if (!(v & BERM_ERROR_BIT))
		return BERM_OK;
	berm_bytes msg = berm_staged(v);
	if (refusal)
		*refusal = msg;
	return BERM_REFUSED;
}
static inline berm_status berm_set_str(const char *key, const char *value, berm_bytes *refusal) {
	return berm_set(key, berm_strlen(key), value, berm_strlen(value), refusal);
}

/* berm_delete removes key; an absent key is not an error. */
static inline void berm_delete(const void *key, size_t key_len) {
	berm_syscall(BERM_SYS_DELETE, key, (uint32_t)key_len);
}
static inline void berm_delete_str(const char *key) { berm_delete(key, berm_strlen(key)); }

/* berm_now is the host's clock in milliseconds since the Unix epoch
 * (declare berm.now). */
static inline int64_t berm_now(void) {
	return (int64_t)berm_syscall(BERM_SYS_NOW, 0, 0);
}

/* ---- berm.http (declare berm.http; the deployment grants the host) ---- */

typedef struct {
	int status;
	/* headers: "Name: value\r\n" lines, names sorted. */
	berm_bytes headers;
	berm_bytes body;
} berm_http_response;

/* berm_http makes one request: method ("GET", ...), an absolute http or https
 * URL, headers an HTTP/1 header block ("Name: value" lines separated by
 * "\r\n" or "\n"; NULL for none), and body. A response of any status, 404
 * and 500 included, is BERM_OK. BERM_REFUSED is the host's refusal (the host
 * is not granted, a bound was passed, the network failed), with its message
 * in *refusal when refusal is not NULL. */
static inline berm_status berm_http(const char *method, const char *url, const char *headers,
                                    const void *body, size_t body_len,
                                    berm_http_response *resp, berm_bytes *refusal) {
	berm_bytes f[4] = {berm__cstr(method), berm__cstr(url), berm__cstr(headers),
	                   {(char *)body, body_len}};
	berm_bytes in = berm_frame(f, 4);
	uint64_t v = berm_syscall(BERM_SYS_HTTP, in.data, (uint32_t)in.len);
	berm_bytes out = berm_staged(v);
	berm_bytes parts[3];
	if (v & BERM_ERROR_BIT) {
		if (refusal)
			*refusal = out;
		return BERM_REFUSED;
	}
	int status = 0;
	int ok = berm_unframe(out, parts, 3) && parts[0].len > 0 && parts[0].len <= 3;
	for (size_t i = 0; ok && i < parts[0].len; i++) {
		char c = parts[0].data[i];
		if (c < '0' || c > '9')
			ok = 0;
		status = status * 10 + (c - '0');
	}
	if (!ok) {
		if (refusal)
			*refusal = berm__cstr("berm.http: the host's response is not a frame of 3 fields with a status");
		return BERM_REFUSED;
	}
	if (resp) {
		resp->status = status;
		resp->headers = parts[1];
		resp->body = parts[2];
	}
	return BERM_OK;
}

/* ---- building text: a growable buffer ---- */

/* berm_buf is a growable byte buffer; {0} is an empty one. data is
 * NUL-terminated once anything was put in it. */
typedef struct {
	char *data;
	size_t len, cap;
} berm_buf;

static inline void berm_buf_grow(berm_buf *b, size_t more) {
	if (b->cap - b->len > more)
		return;
	size_t cap = b->cap ? b->cap * 2 : 64;
	while (cap - b->len <= more)
		cap *= 2;
	char *p = (char *)berm_alloc(cap);
	berm_memcpy(p, b->data, b->len);
	b->data = p;
	b->cap = cap;
}

static inline void berm_buf_put(berm_buf *b, const void *p, size_t n) {
	berm_buf_grow(b, n);
	berm_memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = 0;
}
static inline void berm_buf_str(berm_buf *b, const char *s) { berm_buf_put(b, s, berm_strlen(s)); }
static inline void berm_buf_byte(berm_buf *b, char c) { berm_buf_put(b, &c, 1); }

/* berm_buf_int appends v in decimal. */
static inline void berm_buf_int(berm_buf *b, int64_t v) {
	char tmp[20];
	int n = 0;
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		berm_buf_byte(b, '-');
	while (n)
		berm_buf_byte(b, tmp[--n]);
}

/* berm_buf_json_string appends s as a JSON string, quoted and escaped. */
static inline void berm_buf_json_string(berm_buf *b, const char *s, size_t n) {
	static const char hex[] = "0123456789abcdef";
	berm_buf_byte(b, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		switch (c) {
		case '"': berm_buf_str(b, "\\\""); break;
		case '\\': berm_buf_str(b, "\\\\"); break;
		case '\n': berm_buf_str(b, "\\n"); break;
		case '\r': berm_buf_str(b, "\\r"); break;
		case '\t': berm_buf_str(b, "\\t"); break;
		default:
			if (c < 0x20) {
				char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
				berm_buf_put(b, e, 6);
			} else {
				berm_buf_byte(b, (char)c);
			}
		}
	}
	berm_buf_byte(b, '"');
}

/* ---- reading the arguments: the members of a JSON object ---- */

static inline size_t berm__json_ws(const char *s, size_t n, size_t i) {
	while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
		i++;
	return i;
}

/* berm__json_skip returns the index past the JSON value at s[i], or n+1 when
 * it is not one (it checks the structure, not every detail of numbers and
 * literals: the host checked the arguments against the tool's schema). */
static inline size_t berm__json_skip(const char *s, size_t n, size_t i) {
	i = berm__json_ws(s, n, i);
	if (i >= n)
		return n + 1;
	if (s[i] == '"') {
		for (i++; i < n; i++) {
			if (s[i] == '\\')
				i++;
			else if (s[i] == '"')
				return i + 1;
		}
		return n + 1;
	}
	if (s[i] == '{' || s[i] == '[') {
		size_t depth = 0;
		for (; i < n; i++) {
			char c = s[i];
			if (c == '"') {
				i = berm__json_skip(s, n, i);
				if (i > n)
					return n + 1;
				i--;
			} else if (c == '{' || c == '[') {
				depth++;
			} else if (c == '}' || c == ']') {
				if (--depth == 0)
					return i + 1;
			}
		}
		return n + 1;
	}
	size_t start = i;
	while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' &&
	       s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
		i++;
	return i > start ? i : n + 1;
}

/* berm_json_member finds the member key of the JSON object json and sets
 * *raw to its value's text (a string keeps its quotes); 1 when found. A key
 * with escapes in the object is not matched. */
static inline int berm_json_member(const char *json, size_t n, const char *key, berm_bytes *raw) {
	size_t klen = berm_strlen(key);
	size_t i = berm__json_ws(json, n, 0);
	if (i >= n || json[i] != '{')
		return 0;
	i = berm__json_ws(json, n, i + 1);
	while (i < n && json[i] == '"') {
		size_t kend = berm__json_skip(json, n, i);
		if (kend > n)
			return 0;
		int match = kend - i - 2 == klen && berm_memeq(json + i + 1, key, klen);
		i = berm__json_ws(json, n, kend);
		if (i >= n || json[i] != ':')
			return 0;
		size_t vstart = berm__json_ws(json, n, i + 1);
		size_t vend = berm__json_skip(json, n, vstart);
		if (vend > n)
			return 0;
		if (match) {
			if (raw) {
				raw->data = (char *)json + vstart;
				raw->len = vend - vstart;
			}
			return 1;
		}
		i = berm__json_ws(json, n, vend);
		if (i < n && json[i] == ',')
			i = berm__json_ws(json, n, i + 1);
	}
	return 0;
}

static inline int berm__hex(char c) {
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static inline long berm__json_u4(const char *s, size_t n, size_t i) {
	if (i + 4 > n)
		return -1;
	long v = 0;
	for (int k = 0; k < 4; k++) {
		int h = berm__hex(s[i + k]);
		if (h < 0)
			return -1;
		v = v * 16 + h;
	}
	return v;
}

/* berm_json_decode_string decodes the JSON string raw (quotes included) into
 * *out, as UTF-8; 0 when raw is not a string. */
static inline int berm_json_decode_string(berm_bytes raw, berm_bytes *out) {
	const char *s = raw.data;
	size_t n = raw.len;
	if (n < 2 || s[0] != '"' || s[n - 1] != '"')
		return 0;
	berm_bytes b = berm_bytes_new(n);
	size_t o = 0;
	for (size_t i = 1; i < n - 1; i++) {
		char c = s[i];
		if (c != '\\') {
			b.data[o++] = c;
			continue;
		}
		if (++i >= n - 1)
			return 0;
		switch (s[i]) {
		case '"': b.data[o++] = '"'; break;
		case '\\': b.data[o++] = '\\'; break;
		case '/': b.data[o++] = '/'; break;
		case 'b': b.data[o++] = '\b'; break;
		case 'f': b.data[o++] = '\f'; break;
		case 'n': b.data[o++] = '\n'; break;
		case 'r': b.data[o++] = '\r'; break;
		case 't': b.data[o++] = '\t'; break;
		case 'u': {
			long cp = berm__json_u4(s, n - 1, i + 1);
			if (cp < 0)
				return 0;
			i += 4;
			if (cp >= 0xd800 && cp < 0xdc00 && i + 2 < n - 1 && s[i + 1] == '\\' && s[i + 2] == 'u') {
				long lo = berm__json_u4(s, n - 1, i + 3);
				if (lo >= 0xdc00 && lo < 0xe000) {
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
					i += 6;
				}
			}
			if (cp >= 0xd800 && cp < 0xe000)
				cp = 0xfffd; /* a lone surrogate */
			/* UTF-8 of cp is never longer than its escape (6 or 12 bytes). */
			if (cp < 0x80) {
				b.data[o++] = (char)cp;
			} else if (cp < 0x800) {
				b.data[o++] = (char)(0xc0 | cp >> 6);
				b.data[o++] = (char)(0x80 | (cp & 0x3f));
			} else if (cp < 0x10000) {
				b.data[o++] = (char)(0xe0 | cp >> 12);
				b.data[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
				b.data[o++] = (char)(0x80 | (cp & 0x3f));
			} else {
				b.data[o++] = (char)(0xf0 | cp >> 18);
				b.data[o++] = (char)(0x80 | ((cp >> 12) & 0x3f));
				b.data[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
				b.data[o++] = (char)(0x80 | (cp & 0x3f));
			}
			break;
		}
		default:
			return 0;
		}
	}
	b.data[o] = 0;
	b.len = o;
	*out = b;
	return 1;
}

/* berm_json_string sets *out to the decoded string member key of the JSON
 * object json; 1 when it is there and a string. */
static inline int berm_json_string(const char *json, size_t n, const char *key, berm_bytes *out) {
	berm_bytes raw;
	return berm_json_member(json, n, key, &raw) && berm_json_decode_string(raw, out);
}

/* berm_json_int sets *out to the integer member key of the JSON object json;
 * 1 when it is there and an integer that fits in 64 bits (1e3 and 2.0 are
 * not). */
static inline int berm_json_int(const char *json, size_t n, const char *key, int64_t *out) {
	berm_bytes raw;
	if (!berm_json_member(json, n, key, &raw) || raw.len == 0)
		return 0;
	size_t i = 0;
	int neg = raw.data[0] == '-';
	if (neg)
		i++;
	if (i == raw.len)
		return 0;
	uint64_t v = 0;
	for (; i < raw.len; i++) {
		char c = raw.data[i];
		if (c < '0' || c > '9')
			return 0;
		if (v > (UINT64_MAX - 9) / 10)
			return 0;
		v = v * 10 + (uint64_t)(c - '0');
	}
	if (v > (uint64_t)INT64_MAX + (neg ? 1 : 0))
		return 0;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 1;
}

/* berm_json_bool sets *out to the boolean member key; 1 when it is there and
 * true or false. */
static inline int berm_json_bool(const char *json, size_t n, const char *key, int *out) {
	berm_bytes raw;
	if (!berm_json_member(json, n, key, &raw))
		return 0;
	if (raw.len == 4 && berm_memeq(raw.data, "true", 4)) {
		*out = 1;
		return 1;
	}
	if (raw.len == 5 && berm_memeq(raw.data, "false", 5)) {
		*out = 0;
		return 1;
	}
	return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* BERM_H */

/*
 * kernel: SHA-256 in plain C, the compute kernel by which runtime/'s tests
 * and benchmarks weigh what a deadline costs a program (deadline_test.go).
 * The same file builds for wasm32, a berm program (build.sh), and natively
 * with a main, the reference the benchmark runs beside it.
 */
#include <stddef.h>
#include <stdint.h>

#ifdef __wasm__
#include "berm.h"
#else
#include <stdio.h>
#include <stdlib.h>
#endif

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROTR(x, n) ((x) >> (n) | (x) << (32 - (n)))

static void compress(uint32_t h[8], const uint8_t *p) {
	uint32_t w[64];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ROTR(w[i - 15], 7) ^ ROTR(w[i - 15], 18) ^ w[i - 15] >> 3;
		uint32_t s1 = ROTR(w[i - 2], 17) ^ ROTR(w[i - 2], 19) ^ w[i - 2] >> 10;
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = hh + (ROTR(e, 6) ^ ROTR(e, 11) ^ ROTR(e, 25)) + (e & f ^ ~e & g) + K[i] + w[i];
		uint32_t t2 = (ROTR(a, 2) ^ ROTR(a, 13) ^ ROTR(a, 22)) + (a & b ^ a & c ^ b & c);
		hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
	}
	h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

/* sha256 writes the digest of the len bytes at p to out. */
static void sha256(const uint8_t *p, size_t len, uint8_t out[32]) {
	uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	size_t n = len;
	for (; n >= 64; n -= 64, p += 64)
		compress(h, p);
	uint8_t last[128] = {0};
	for (size_t i = 0; i < n; i++)
		last[i] = p[i];
	last[n] = 0x80;
	size_t end = n < 56 ? 64 : 128;
	uint64_t bits = (uint64_t)len * 8;
	for (int i = 0; i < 8; i++)
		last[end - 1 - i] = (uint8_t)(bits >> (8 * i));
	for (size_t i = 0; i < end; i += 64)
		compress(h, last + i);
	for (int i = 0; i < 32; i++)
		out[i] = (uint8_t)(h[i / 4] >> (24 - 8 * (i % 4)));
}

/* One MiB, hashed once per MiB asked for: each time its first 32 bytes are
 * the digest before, so that no pass can be skipped. */
static uint8_t buf[1 << 20];

static void chain(uint32_t mib, uint8_t out[32]) {
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (uint8_t)(i * 31 + 7);
	for (uint32_t r = 0; r < mib; r++) {
		sha256(buf, sizeof buf, out);
		for (int i = 0; i < 32; i++)
			buf[i] = out[i];
	}
}

static void hex(const uint8_t d[32], char out[65]) {
	for (int i = 0; i < 32; i++) {
		out[2 * i] = "0123456789abcdef"[d[i] >> 4];
		out[2 * i + 1] = "0123456789abcdef"[d[i] & 15];
	}
	out[64] = 0;
}

#ifdef __wasm__
/* sha256: {"mib": n} -> the hex digest of n chained passes over 1 MiB. */
BERM_TOOL(sha256) {
	berm_bytes args = berm_args(), raw;
	uint32_t mib = 0;
	if (berm_json_member(args.data, args.len, "mib", &raw))
		for (size_t i = 0; i < raw.len && raw.data[i] >= '0' && raw.data[i] <= '9'; i++)
			mib = mib * 10 + (uint32_t)(raw.data[i] - '0');
	uint8_t d[32];
	char s[65];
	chain(mib, d);
	hex(d, s);
	berm_result(s, 64);
}

/* spin: hashes forever, until the host stops it. */
BERM_TOOL(spin) {
	uint8_t d[32];
	for (;;)
		chain(1, d);
}
#else
/* kernel N prints the digest of N chained passes over 1 MiB. */
int main(int argc, char **argv) {
	uint8_t d[32];
	char s[65];
	chain(argc > 1 ? (uint32_t)strtoul(argv[1], 0, 10) : 1, d);
	hex(d, s);
	puts(s);
	return 0;
}
#endif

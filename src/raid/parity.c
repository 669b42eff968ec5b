/* parity.c - RAID5/RAID6 parity arithmetic over GF(2^8).
 *
 * Owns: generating P and Q, rebuilding one or two lost blocks of a stripe,
 * locating a single bad block for scrub, and the CPU-specific kernels
 * behind them.  No I/O.  State: field tables built when the program loads
 * (parity_init(), a constructor) and read-only after, and the kernel set
 * in use (kernels_cur), picked there for the CPU.
 *
 * Field: GF(2^8) with polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11d) and
 * generator g = 2, as Linux md's raid6.  Addition is XOR.
 *
 * Invariants:
 *  1. Every kernel set gives bit-identical results; tests run them all.
 *  2. Any len >= 1 and any pointer alignment: kernels walk columns of VW
 *     bytes with unaligned loads and stores; the last, partial column goes
 *     through the same code from zero-padded copies, and only its bytes
 *     are stored back (the multiply kernels finish byte by byte with the
 *     nibble tables).  Nothing outside [0, len) is read or written.
 *  3. A kernel loads every input of a column before it stores an output,
 *     so an output may be the buffer of pin, qin or src of the same call.
 *  4. Q is evaluated by Horner's rule from the highest data block down:
 *     q = D[n-1]; q = 2*q ^ D[i] for i = n-2 .. 0, which is sum g^i D[i].
 *     Multiplying by 2 needs no table: shift each byte left and XOR 0x1d
 *     into the bytes whose top bit was set.
 *
 * Rebuilding (A ^ B is GF addition; P', Q' are P and Q of the surviving
 * data with the lost data blocks taken as zero):
 *  - one data block x:  D[x] = P ^ P'
 *  - data x and P:      D[x] = (Q ^ Q') / g^x
 *  - data x < y:        S = P ^ P' = D[x] ^ D[y],  T = Q ^ Q' = g^x D[x] ^ g^y D[y],
 *                       so D[x] = (T ^ g^y S) / (g^x ^ g^y) and D[y] = S ^ D[x]
 *  - a lost P or Q is generated again once the data is whole.
 */
#include <errno.h>
#include <string.h>

#include "tierfs/parity.h"

#if defined(__x86_64__) || defined(__i386__)
#define TFS_PARITY_X86 1
#include <immintrin.h>
#endif

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* ------------------------------------------------------------------ */
/* Scalar field arithmetic                                             */
/* ------------------------------------------------------------------ */

static uint8_t gf_exp[2 * 255];	/* g^i, twice over: log a + log b needs no mod */
static uint8_t gf_log[256];		/* gf_log[g^i] = i; gf_log[0] unused */
static uint8_t gf_nib[256][32];		/* see nibble tables below */

static uint8_t gf_mul2(uint8_t a)
{
	return (uint8_t)((a << 1) ^ (a & 0x80 ? 0x1d : 0));
}

static uint8_t gf_mul(uint8_t a, uint8_t b)
{
	return a && b ? gf_exp[gf_log[a] + gf_log[b]] : 0;
}

static uint8_t gf_inv(uint8_t a)	/* a != 0 */
{
	return gf_exp[255 - gf_log[a]];
}

uint8_t tfs_gf_pow2(unsigned i)
{
	return gf_exp[i % 255];
}

/* Nibble tables: c * b == lo[b & 15] ^ hi[b >> 4] with lo = gf_nib[c],
 * hi = gf_nib[c] + 16, the products of c with the 16 low nibbles x and
 * the 16 high nibbles x << 4. */
static void mul_bytes(uint8_t *dst, const uint8_t *src, uint8_t c, size_t len, int acc)
{
	const uint8_t *lo = gf_nib[c], *hi = gf_nib[c] + 16;

	for (size_t i = 0; i < len; i++) {
		uint8_t r = lo[src[i] & 15] ^ hi[src[i] >> 4];

		dst[i] = acc ? dst[i] ^ r : r;
	}
}

/* ------------------------------------------------------------------ */
/* Portable column kernels                                             */
/*                                                                     */
/* A column is 64 bytes held as four 16-byte GCC vectors (SSE2 on      */
/* x86-64, NEON on arm64, plain words elsewhere): four independent     */
/* chains for the CPU to overlap, all in registers.                    */
/* ------------------------------------------------------------------ */

#define VW 64
typedef uint8_t v16 __attribute__((vector_size(16)));
typedef int8_t sv16 __attribute__((vector_size(16)));

struct col {
	v16 a, b, c, d;
};

/* One call's worth of syndrome work, see syn_col(). */
struct syn_job {
	void *const *src;	/* nsrc data blocks, NULL for an all-zero one */
	unsigned nsrc;
	const uint8_t *pin, *qin;	/* XORed into P, Q when not NULL */
	uint8_t *pout, *qout;		/* written when not NULL */
};

ALWAYS_INLINE v16 v_load(const uint8_t *p)
{
	v16 v;

	memcpy(&v, p, sizeof(v));
	return v;
}

ALWAYS_INLINE void v_store(uint8_t *p, v16 v)
{
	memcpy(p, &v, sizeof(v));
}

/* n bytes (n <= VW; the rest zero) */
ALWAYS_INLINE struct col col_load(const uint8_t *p, size_t n)
{
	uint8_t pad[VW] = { 0 };

	if (n < VW)
		p = memcpy(pad, p, n);
	return (struct col){ v_load(p), v_load(p + 16), v_load(p + 32), v_load(p + 48) };
}

ALWAYS_INLINE void col_store(uint8_t *p, struct col x, size_t n)
{
	uint8_t pad[VW], *to = n < VW ? pad : p;

	v_store(to, x.a);
	v_store(to + 16, x.b);
	v_store(to + 32, x.c);
	v_store(to + 48, x.d);
	if (n < VW)
		memcpy(p, pad, n);
}

ALWAYS_INLINE struct col col_xor(struct col x, struct col y)
{
	return (struct col){ x.a ^ y.a, x.b ^ y.b, x.c ^ y.c, x.d ^ y.d };
}

/* Times 2: each byte shifted left, 0x1d where its top bit was set. */
ALWAYS_INLINE v16 v_mul2(v16 v)
{
	return (v + v) ^ ((v16)((sv16)v < 0) & 0x1d);
}

ALWAYS_INLINE struct col col_mul2(struct col x)
{
	return (struct col){ v_mul2(x.a), v_mul2(x.b), v_mul2(x.c), v_mul2(x.d) };
}

/* Times c: the sum of x * 2^b over the bits b of c. */
ALWAYS_INLINE struct col col_mulc(struct col x, uint8_t c)
{
	struct col r = { { 0 }, { 0 }, { 0 }, { 0 } };

	for (;;) {
		if (c & 1)
			r = col_xor(r, x);
		c >>= 1;
		if (!c)
			return r;
		x = col_mul2(x);
	}
}

/* Column [off, off+n) of P = pin ^ sum src[i] and Q = qin ^ sum g^i src[i]. */
ALWAYS_INLINE void syn_col(const struct syn_job *j, size_t off, size_t n, int wp, int wq)
{
	unsigned i = j->nsrc - 1;
	const uint8_t *s = j->src[i];
	struct col p = { { 0 }, { 0 }, { 0 }, { 0 } }, q = p, d;

	if (s)
		p = q = col_load(s + off, n);
	while (i--) {
		if (wq)
			q = col_mul2(q);
		s = j->src[i];
		if (s) {
			d = col_load(s + off, n);
			p = col_xor(p, d);
			q = col_xor(q, d);
		}
	}
	if (wp && j->pin)
		p = col_xor(p, col_load(j->pin + off, n));
	if (wq && j->qin)
		q = col_xor(q, col_load(j->qin + off, n));
	if (wp)
		col_store(j->pout + off, p, n);
	if (wq)
		col_store(j->qout + off, q, n);
}

ALWAYS_INLINE void syn_run(const struct syn_job *j, size_t len, int wp, int wq)
{
	size_t off = 0;

	for (; off + VW <= len; off += VW)
		syn_col(j, off, VW, wp, wq);
	if (off < len)
		syn_col(j, off, len - off, wp, wq);
}

/* dst = c * src (acc 0) or dst ^= c * src (acc 1); dst may be src. */
static void mul_generic(uint8_t *dst, const uint8_t *src, uint8_t c, size_t len, int acc)
{
	size_t off = 0;

	for (; off + VW <= len; off += VW) {
		struct col r = col_mulc(col_load(src + off, VW), c);

		col_store(dst + off, acc ? col_xor(r, col_load(dst + off, VW)) : r, VW);
	}
	mul_bytes(dst + off, src + off, c, len - off, acc);
}

static void syndrome_generic(const struct syn_job *j, size_t len)
{
	if (j->pout && j->qout)
		syn_run(j, len, 1, 1);
	else if (j->pout)
		syn_run(j, len, 1, 0);
	else if (j->qout)
		syn_run(j, len, 0, 1);
}

/* ------------------------------------------------------------------ */
/* x86 multiply kernels: pshufb nibble tables, GFNI affine            */
/* ------------------------------------------------------------------ */

#ifdef TFS_PARITY_X86

/* c * v by two 16-entry lookups (pshufb), one per nibble of each byte. */
__attribute__((target("ssse3")))
static void mul_ssse3(uint8_t *dst, const uint8_t *src, uint8_t c, size_t len, int acc)
{
	__m128i tlo = _mm_loadu_si128((const __m128i *)gf_nib[c]);
	__m128i thi = _mm_loadu_si128((const __m128i *)(gf_nib[c] + 16));
	__m128i mask = _mm_set1_epi8(0x0f);
	size_t off = 0;

	for (; off + 16 <= len; off += 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(src + off));
		__m128i r = _mm_shuffle_epi8(tlo, _mm_and_si128(v, mask)) ^
			    _mm_shuffle_epi8(thi, _mm_and_si128(_mm_srli_epi16(v, 4), mask));

		if (acc)
			r = _mm_xor_si128(r, _mm_loadu_si128((const __m128i *)(dst + off)));
		_mm_storeu_si128((__m128i *)(dst + off), r);
	}
	mul_bytes(dst + off, src + off, c, len - off, acc);
}

/* The same 32 bytes at a time; the last < 32 bytes go to mul_ssse3(). */
__attribute__((target("avx2")))
static void mul_avx2(uint8_t *dst, const uint8_t *src, uint8_t c, size_t len, int acc)
{
	__m256i tlo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)gf_nib[c]));
	__m256i thi = _mm256_broadcastsi128_si256(
		_mm_loadu_si128((const __m128i *)(gf_nib[c] + 16)));
	__m256i mask = _mm256_set1_epi8(0x0f);
	size_t off = 0;

	for (; off + 32 <= len; off += 32) {
		__m256i v = _mm256_loadu_si256((const __m256i *)(src + off));
		__m256i r = _mm256_shuffle_epi8(tlo, v & mask) ^
			    _mm256_shuffle_epi8(thi, _mm256_srli_epi16(v, 4) & mask);

		if (acc)
			r ^= _mm256_loadu_si256((const __m256i *)(dst + off));
		_mm256_storeu_si256((__m256i *)(dst + off), r);
	}
	_mm256_zeroupper();	/* GCC leaves it out before this tail call */
	mul_ssse3(dst + off, src + off, c, len - off, acc);
}

/* Multiplying by c is linear over GF(2): an 8x8 bit matrix M with
 * column b = c * 2^b.  gf2p8affineqb computes result bit i as the parity
 * of (byte 7-i of the matrix operand) & x, so byte 7-i holds row i of M. */
static uint64_t gf_affine[256];	/* affine_matrix(c) */

static uint64_t affine_matrix(uint8_t c)
{
	uint64_t m = 0;

	for (unsigned i = 0; i < 8; i++) {
		uint64_t row = 0;

		for (unsigned b = 0; b < 8; b++)
			row |= (uint64_t)((gf_mul(c, (uint8_t)(1u << b)) >> i) & 1) << b;
		m |= row << (8 * (7 - i));
	}
	return m;
}

__attribute__((target("gfni,avx2")))
static void mul_gfni(uint8_t *dst, const uint8_t *src, uint8_t c, size_t len, int acc)
{
	__m256i m = _mm256_set1_epi64x((long long)gf_affine[c]);
	size_t off = 0;

	for (; off + 32 <= len; off += 32) {
		__m256i r = _mm256_gf2p8affine_epi64_epi8(
			_mm256_loadu_si256((const __m256i *)(src + off)), m, 0);

		if (acc)
			r ^= _mm256_loadu_si256((const __m256i *)(dst + off));
		_mm256_storeu_si256((__m256i *)(dst + off), r);
	}
	_mm256_zeroupper();	/* GCC leaves it out before this tail call */
	mul_ssse3(dst + off, src + off, c, len - off, acc);
}

static int has_ssse3(void)
{
	return __builtin_cpu_supports("ssse3");
}

static int has_avx2(void)
{
	return __builtin_cpu_supports("avx2");
}

static int has_gfni(void)
{
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("gfni");
}

#endif

/* ------------------------------------------------------------------ */
/* Kernel sets and the choice among them                               */
/* ------------------------------------------------------------------ */

struct kernels {
	const char *name;
	int (*usable)(void);	/* NULL: always */
	void (*syndrome)(const struct syn_job *j, size_t len);
	/* dst = c * src, or dst ^= c * src with acc; dst may be src */
	void (*mul)(uint8_t *dst, const uint8_t *src, uint8_t c, size_t len, int acc);
};

/* In order of preference, best last. */
static const struct kernels kernel_sets[] = {
	{ .name = "generic", .syndrome = syndrome_generic, .mul = mul_generic },
#ifdef TFS_PARITY_X86
	{ .name = "ssse3", .usable = has_ssse3, .syndrome = syndrome_generic, .mul = mul_ssse3 },
	{ .name = "avx2", .usable = has_avx2, .syndrome = syndrome_generic, .mul = mul_avx2 },
	{ .name = "gfni", .usable = has_gfni, .syndrome = syndrome_generic, .mul = mul_gfni },
#endif
};

#define NSETS (sizeof(kernel_sets) / sizeof(kernel_sets[0]))

static const struct kernels *kernels_cur;	/* set by parity_init(), tfs_parity_use() */

static const struct kernels *kern(void)
{
	return __atomic_load_n(&kernels_cur, __ATOMIC_ACQUIRE);
}

/* Runs when the program loads: builds the field tables, picks the best
 * kernel set this CPU has. */
__attribute__((constructor))
static void parity_init(void)
{
	const struct kernels *k = NULL;
	uint8_t x = 1;

	for (unsigned i = 0; i < 255; i++, x = gf_mul2(x)) {
		gf_exp[i] = gf_exp[i + 255] = x;
		gf_log[x] = (uint8_t)i;
	}
	for (unsigned c = 0; c < 256; c++) {
		for (unsigned n = 0; n < 16; n++) {
			gf_nib[c][n] = gf_mul((uint8_t)c, (uint8_t)n);
			gf_nib[c][16 + n] = gf_mul((uint8_t)c, (uint8_t)(n << 4));
		}
#ifdef TFS_PARITY_X86
		gf_affine[c] = affine_matrix((uint8_t)c);
#endif
	}
#ifdef TFS_PARITY_X86
	__builtin_cpu_init();
#endif
	for (size_t i = 0; i < NSETS; i++)
		if (!kernel_sets[i].usable || kernel_sets[i].usable())
			k = &kernel_sets[i];
	__atomic_store_n(&kernels_cur, k, __ATOMIC_RELEASE);
}

const char *tfs_parity_impl(void)
{
	return kern()->name;
}

int tfs_parity_use(const char *name)
{
	for (size_t i = 0; i < NSETS; i++) {
		if (strcmp(name, kernel_sets[i].name) != 0)
			continue;
		if (kernel_sets[i].usable && !kernel_sets[i].usable())
			return -ENOTSUP;
		__atomic_store_n(&kernels_cur, &kernel_sets[i], __ATOMIC_RELEASE);
		return 0;
	}
	return -EINVAL;
}

/* ------------------------------------------------------------------ */
/* Generate, XOR, multiply                                             */
/* ------------------------------------------------------------------ */

static void syndrome(void *const *src, unsigned nsrc, void *pin, void *qin,
		     void *pout, void *qout, size_t len)
{
	struct syn_job j = {
		.src = src, .nsrc = nsrc, .pin = pin, .qin = qin,
		.pout = pout, .qout = qout,
	};

	kern()->syndrome(&j, len);
}

void tfs_parity_gen(void **blocks, unsigned ndata, unsigned nparity, size_t len)
{
	if (ndata == 0 || nparity == 0 || nparity > 2 || len == 0)
		return;
	syndrome(blocks, ndata, NULL, NULL, blocks[ndata],
		 nparity == 2 ? blocks[ndata + 1] : NULL, len);
}

void tfs_parity_xor(void *dst, const void *src, size_t len)
{
	void *s = (void *)src;

	if (len)
		syndrome(&s, 1, dst, NULL, dst, NULL, len);
}

void tfs_parity_mul_xor(void *dst, const void *src, uint8_t coef, size_t len)
{
	if (coef == 1)
		tfs_parity_xor(dst, src, len);
	else if (coef)
		kern()->mul(dst, src, coef, len, 1);
}

/* ------------------------------------------------------------------ */
/* Recovery                                                            */
/* ------------------------------------------------------------------ */

int tfs_parity_recover(void **blocks, unsigned ndata, unsigned nparity,
		       const unsigned *miss, unsigned nmiss, size_t len)
{
	void *src[TFS_PARITY_MAX_DATA];
	unsigned P = ndata, Q = ndata + 1, x, y;
	uint8_t gx, gy, inv;

	if (ndata == 0 || ndata > TFS_PARITY_MAX_DATA || nparity == 0 || nparity > 2 ||
	    nmiss > nparity)
		return -EINVAL;
	for (unsigned i = 0; i < nmiss; i++)
		if (miss[i] >= ndata + nparity)
			return -EINVAL;
	if (nmiss == 0 || len == 0)
		return 0;
	x = miss[0];
	y = nmiss == 2 ? miss[1] : x;
	if (nmiss == 2 && x == y)
		return -EINVAL;
	if (x > y) {
		x = y;
		y = miss[0];
	}
	memcpy(src, blocks, ndata * sizeof(*src));
	if (x < ndata)
		src[x] = NULL;
	if (y < ndata)
		src[y] = NULL;

	if (x >= ndata) {
		/* only parity lost: generate it again */
		syndrome(src, ndata, NULL, NULL, x == P ? blocks[P] : NULL,
			 y == Q ? blocks[Q] : NULL, len);
	} else if (y == x || y == Q) {
		/* data x from P, then Q from the whole data */
		syndrome(src, ndata, blocks[P], NULL, blocks[x], NULL, len);
		if (y == Q) {
			src[x] = blocks[x];
			syndrome(src, ndata, NULL, NULL, NULL, blocks[Q], len);
		}
	} else if (y == P) {
		/* data x from Q, then P from the whole data */
		syndrome(src, ndata, NULL, blocks[Q], NULL, blocks[x], len);
		kern()->mul(blocks[x], blocks[x], gf_inv(tfs_gf_pow2(x)), len, 0);
		src[x] = blocks[x];
		syndrome(src, ndata, NULL, NULL, blocks[P], NULL, len);
	} else {
		/* data x < y: S into y, T into x, then solve in place */
		syndrome(src, ndata, blocks[P], blocks[Q], blocks[y], blocks[x], len);
		gx = tfs_gf_pow2(x);
		gy = tfs_gf_pow2(y);
		inv = gf_inv(gx ^ gy);
		kern()->mul(blocks[x], blocks[x], inv, len, 0);
		tfs_parity_mul_xor(blocks[x], blocks[y], gf_mul(gy, inv), len);
		tfs_parity_xor(blocks[y], blocks[x], len);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Scrub: locating a single bad block                                  */
/*                                                                     */
/* With syndromes Sp = P ^ P(data) and Sq = Q ^ Q(data), one bad block */
/* leaves in every byte column either nothing, or Sp only (P bad), Sq  */
/* only (Q bad), or both with Sq = g^z Sp (data z bad, z < ndata).     */
/* ------------------------------------------------------------------ */

#define LOCATE_PIECE 4096

/* Block that explains column (sp, sq), or -2. */
static int locate_column(uint8_t sp, uint8_t sq, unsigned ndata)
{
	unsigned z;

	if (!sq)
		return (int)ndata;
	if (!sp)
		return (int)ndata + 1;
	z = (gf_log[sq] + 255u - gf_log[sp]) % 255;
	return z < ndata ? (int)z : -2;
}

int tfs_parity_locate(void **blocks, unsigned ndata, size_t len)
{
	uint8_t sp[LOCATE_PIECE], sq[LOCATE_PIECE];
	void *src[TFS_PARITY_MAX_DATA];
	int found = -1;

	if (ndata == 0 || ndata > TFS_PARITY_MAX_DATA)
		return -EINVAL;
	for (size_t off = 0; off < len; off += LOCATE_PIECE) {
		size_t n = len - off < LOCATE_PIECE ? len - off : LOCATE_PIECE;
		uint8_t any = 0;

		for (unsigned i = 0; i < ndata; i++)
			src[i] = (uint8_t *)blocks[i] + off;
		syndrome(src, ndata, (uint8_t *)blocks[ndata] + off,
			 (uint8_t *)blocks[ndata + 1] + off, sp, sq, n);
		for (size_t k = 0; k < n; k++)
			any |= sp[k] | sq[k];
		for (size_t k = 0; any && k < n; k++) {
			int who;

			if (!sp[k] && !sq[k])
				continue;
			who = locate_column(sp[k], sq[k], ndata);
			if (who == -2 || (found >= 0 && who != found))
				return -2;
			found = who;
		}
	}
	return found;
}

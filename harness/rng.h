/*
 * rng.h — the harness's seeded generator: splitmix64 to expand a seed,
 * xoshiro256** for the stream.  Every fuzz case and every generated tensor
 * comes from one of these, so (seed, case index) reproduces a case exactly
 * on any machine (no libc rand(), no time()).
 *
 * Header-only (static inline): the harness library, its CPU tests and the
 * CLI share it without build wiring.
 */
#ifndef NF_HARNESS_RNG_H
#define NF_HARNESS_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct nf_hrng { uint64_t s[4]; } nf_hrng;

/* splitmix64: one step of Steele/Lea/Flood's mixer; also a good 64-bit hash. */
static inline uint64_t nf_hrng_mix(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A seed for stream `index` of `seed`: distinct indices give unrelated streams. */
static inline uint64_t nf_hrng_derive(uint64_t seed, uint64_t index)
{
    uint64_t st = seed ^ (0xD1B54A32D192ED03ull * (index + 1));
    return nf_hrng_mix(&st);
}

static inline void nf_hrng_seed(nf_hrng *r, uint64_t seed)
{
    uint64_t st = seed;
    for (int i = 0; i < 4; ++i)
        r->s[i] = nf_hrng_mix(&st);
}

static inline uint64_t nf_hrng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** (Blackman & Vigna). */
static inline uint64_t nf_hrng_next(nf_hrng *r)
{
    uint64_t *s = r->s;
    const uint64_t out = nf_hrng_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = nf_hrng_rotl(s[3], 45);
    return out;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double nf_hrng_uniform(nf_hrng *r) { return (double)(nf_hrng_next(r) >> 11) * 0x1.0p-53; }

/* Uniform integer in [0, n), n >= 1 (multiply-shift; bias < n / 2^64). */
static inline int64_t nf_hrng_below(nf_hrng *r, int64_t n)
{
    return (int64_t)(((unsigned __int128)nf_hrng_next(r) * (uint64_t)n) >> 64);
}

/* Standard normal by Box-Muller (one value per call; the pair's second half
 * is dropped so the stream position does not depend on call history). */
static inline double nf_hrng_normal(nf_hrng *r)
{
    const double two_pi = 6.283185307179586476925286766559;
    double u1 = nf_hrng_uniform(r), u2 = nf_hrng_uniform(r);
    if (u1 < 0x1.0p-60)
        u1 = 0x1.0p-60;
    return sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
}

#endif /* NF_HARNESS_RNG_H */

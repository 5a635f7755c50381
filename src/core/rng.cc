// Rng: xoshiro256** (Blackman & Vigna), seeded through SplitMix64 as its authors recommend.
#include "hymoe/rng.h"

#include <cmath>
#include <numbers>

#include "hymoe/error.h"

namespace hymoe {
namespace {
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2.0 * std::numbers::pi * u2);
  has_spare_ = true;
  return r * std::cos(2.0 * std::numbers::pi * u2);
}

uint64_t Rng::below(uint64_t bound) {
  HYMOE_CHECK(bound > 0);
  // Rejection sampling removes the modulo bias.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t x = next_u64();
  while (x >= limit) x = next_u64();
  return x % bound;
}

Tensor random_normal(Rng& rng, Shape shape, double stddev) {
  Tensor t(std::move(shape));
  for (float& v : t.values()) v = static_cast<float>(rng.normal() * stddev);
  return t;
}

Tensor random_uniform(Rng& rng, Shape shape, double lo, double hi) {
  Tensor t(std::move(shape));
  for (float& v : t.values()) v = static_cast<float>(lo + (hi - lo) * rng.uniform());
  return t;
}

}  // namespace hymoe

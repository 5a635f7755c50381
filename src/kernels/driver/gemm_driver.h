// The grouped GEMM driver: blocks and schedules many independent GEMMs (one per group, e.g. per expert) as one
// pool of (group, row-block, column-block) tiles, so a layer where most groups have few rows still keeps every
// thread busy. Each tile runs the ISA's micro-kernel over K blocks into a per-thread scratch tile and hands the
// finished tile to an epilogue (activation, scale, store). ISA- and format-free: it calls the kernels through a
// GemmFormat (f32, bf16 widening, bf16 dot, q8 blocks), so every weight format shares this one schedule.
//
// Regimes: a group with at most kMaxRowBlock rows is one row block, so each of its weight panels is read from
// memory exactly once (the decode path: T of 1-8 streams the weights); larger groups are split into row blocks
// of at most that many rows, each reusing a KC x NC weight block from L2 (the GEMM path).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hymoe/threads.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/driver/thread_pool.h"
#include "kernels/driver/workspace.h"

namespace hymoe::kernels {

// One GEMM of the batch: C (m, panels * NR) = A (m, k) . P where P is `panels` packed panels of (k, NR).
struct GemmGroup {
  const float* a = nullptr;
  int64_t lda = 0;
  const int64_t* a_rows = nullptr;  // optional (m): row i of A is a + a_rows[i] * lda (a gather fused into packing)
  int64_t m = 0;
  int64_t k = 0;
  const void* b = nullptr;  // `panels` packed panels in the format given to run_gemm_groups
  int64_t panels = 0;
};

struct GemmTile {
  int64_t group, r0, rows, p0, np;
};

// Blocking. A K block of one f32 weight panel (KC * NR * 4 bytes = 8 KiB on AVX2) stays in L1 while the row
// block's micro-tiles sweep it, and so does, for the 32-48 rows per expert of a 512-token prefill, the row
// block's K block of A (3 KiB per micro-tile: 16-24 KiB): the micro-tiles then read A from L1, not L2. A row
// block of up to kMaxRowBlockTiles * MR rows and a KC x NC weight block live in L2. KC = 256 (A from L2) measured
// 5-16% slower at 128 tokens and up to 7% at 512 once the micro-kernel lost its per-step test, decode within
// noise (docs/performance.md).
constexpr int64_t kKc = 128;
constexpr int64_t kNcColumns = 128;
constexpr int64_t kMaxRowBlockTiles = 16;  // row block <= 16 * MR rows
// The largest activation micro-panel (bytes over all of K) with which the few-rows calls of the f32 and bf16
// formats skip the K blocks: half of a 32 KiB L1, the other half for the weight lines streaming through. (The
// int8 formats skip them at any K: run_gemm_groups.)
constexpr int64_t kFewWholeKActivationBytes = 16 * 1024;
static_assert(kKc % k_unit(WeightFormat::kBf16Dot) == 0 && kKc % k_unit(WeightFormat::kQ8Block32) == 0 &&
                  kKc % k_unit(WeightFormat::kGgmlQ4_K) == 0 && kKc % k_unit(WeightFormat::kGgmlQ6_K) == 0,
              "K blocks must end on whole k units of every format");

// Rows per row block of a group of m rows: one block when m <= 16 * MR, else equal blocks rounded up to MR rows.
// Every block but the last is a whole number of micro-tiles.
inline int64_t row_block_rows(int64_t m, int mr) {
  const int64_t max_block = kMaxRowBlockTiles * mr;
  const int64_t blocks = (m + max_block - 1) / max_block;
  return ((m + blocks - 1) / blocks + mr - 1) / mr * mr;
}

// Micro-tile i of a row block of n rows: the block is split into ceil(n / MR) micro-tiles whose sizes differ by
// at most one (32 rows: 6, 6, 5, 5, 5, 5), not MR, ..., MR and a short remainder (6, 6, 6, 6, 6, 2). A tile of
// 1-3 rows has too few independent FMA chains to cover the FMA latency and costs nearly as much as a full one;
// tiles of 4-6 rows all run at the full rate. Measured with the same kernels in one process: 3-10% faster for
// groups of 7-26 rows, about 3% (median, within noise) for 32-48 (docs/performance.md). The bits do not change:
// every C element is still one FMA chain in k order.
struct MicroTile {
  int64_t start;
  int rows;
};
inline MicroTile micro_tile(int64_t n, int mr, int64_t i) {
  const int64_t tiles = (n + mr - 1) / mr, base = n / tiles, extra = n % tiles;
  return {i * base + std::min(i, extra), static_cast<int>(base + (i < extra ? 1 : 0))};
}

// The activation units (ActivationUnitLayout) of `rows` rows laid out for mr-row micro-tiles, copied from rows
// quantized on their own (micro-panels of one row), row i of the micro-panel from row index[i]: the bytes the
// format's pack_a writes from those rows, as each unit's quantization depends on its row alone. Rows past `rows`
// are zeros, as pack_a leaves them.
inline void gather_activation_units(const uint8_t* quantized, int64_t row_bytes, const int64_t* index, int rows,
                                    int sub_unit, int mr, uint8_t* out) {
  const ActivationUnitLayout from{sub_unit, 1}, to{sub_unit, mr};
  const int64_t units = row_bytes / from.bytes();
  std::memset(out, 0, static_cast<size_t>(units * to.bytes()));
  for (int i = 0; i < rows; ++i) {
    const uint8_t* src = quantized + index[i] * row_bytes;
    for (int64_t u = 0; u < units; ++u, src += from.bytes()) {
      uint8_t* dst = out + u * to.bytes();
      for (int g = 0; g < sub_unit / 4; ++g) std::memcpy(dst + to.codes(g, i), src + from.codes(g, 0), 4);
      std::memcpy(dst + to.scale(i), src + from.scale(0), 4);
      std::memcpy(dst + to.sum(i), src + from.sum(0), 4);
    }
  }
}

// Splits every group into tiles; shrinks the column block while there are fewer than 8 tiles a thread, but not
// below the panels of one decode-form call (kFewRowsPanels[m]) where a group has few enough rows to take it,
// unless some thread would then have no tile at all: a narrower tile runs the lone micro-tile over K blocks, and
// tiles of 1 or 2 panels took 1.05-1.6x the time a byte of tiles of 4 (docs/performance.md, "Decode tiles on many
// threads"). At one token that floor is what many threads meet: Qwen3-30B-A3B's gate/up has 384 panels, 96 tiles
// of 4, fewer than 8 a thread from 13 threads on; a lone shared expert's down (64 panels, 16 tiles of 4) narrows
// from 17 threads on, where leaving threads idle would cost more than the narrow tiles' rate.
inline std::vector<GemmTile> plan_tiles(const GemmFormat& f, const std::vector<GemmGroup>& groups, int threads,
                                        int64_t& max_rows, int64_t& max_panels) {
  int64_t nc = std::max<int64_t>(1, kNcColumns / f.nr), min_nc = 1;
  for (const auto& g : groups)
    if (g.m >= 1 && g.m <= f.few_rows_max) min_nc = std::max<int64_t>(min_nc, kFewRowsPanels[g.m]);
  auto count = [&](int64_t ncp) {
    int64_t n = 0;
    for (const auto& g : groups)
      if (g.m > 0) {
        const int64_t per = row_block_rows(g.m, f.mr);
        n += ((g.m + per - 1) / per) * ((g.panels + ncp - 1) / ncp);
      }
    return n;
  };
  for (int64_t n; nc > 1 && (n = count(nc)) < 8 * threads && (nc / 2 >= min_nc || n < threads);) nc /= 2;
  std::vector<GemmTile> tiles;
  max_rows = 0;
  max_panels = nc;
  for (size_t g = 0; g < groups.size(); ++g) {
    const int64_t m = groups[g].m;
    if (m == 0) continue;
    const int64_t per = row_block_rows(m, f.mr);
    for (int64_t r0 = 0; r0 < m; r0 += per)
      for (int64_t p0 = 0; p0 < groups[g].panels; p0 += nc) {
        tiles.push_back({static_cast<int64_t>(g), r0, std::min(per, m - r0), p0, std::min(nc, groups[g].panels - p0)});
        max_rows = std::max(max_rows, std::min(per, m - r0));
      }
  }
  return tiles;
}


// Weight prefetch. When a tile has several row micro-tiles, the first reads each (k block, panel) of weights
// from memory and the others reuse it from L1: the demand is bursty, and the first micro-tile would stall on
// DRAM at ~10 bytes a cycle. So the micro-tiles of a block prefetch the next block toward L2, each its share,
// spread evenly over its k loop: the first micro-tile of the next block then finds it there. A tile of a single
// micro-tile (2-6 rows) prefetches the next block itself, which keeps a second stream in flight beside the one it
// reads. A tile of more rows than the format's few-rows form runs each panel over all of K, so the next block is
// the next one in memory (a panel's K blocks are contiguous) and the hardware's stream prefetchers follow the
// stream the software prefetch leads. Measured (docs/performance.md): at 512 tokens on Qwen3-30B-A3B f32, 12-18%
// faster than the hardware prefetchers alone, and another 4-8% for spreading each share evenly rather than in a
// burst; at 32 tokens 6-37% faster with the lone micro-tile's prefetch; a prefetch of the whole next block at once
// (256 lines in a burst) 5-10% slower. On Zen 4 at 512 tokens, native bf16: with the panels inner (each k block
// read across the tile's panels, 8-128 KiB apart) a block took 1.15x the TSC ticks, its first micro-tile 1.2x;
// with the first micro-tile leaving the prefetch to the others, the layer took 1.04-1.08x the time. The decode
// path (one row over several panels per call) gets no hint: its forms prefetch for themselves, each panel a fixed
// distance ahead (kDecodePrefetchBytes; fp8's their own, gemm_fp8_dot-inl.h and gemm_quantized_avx2.cc).
template <typename Epilogue>
void run_gemm_groups(const GemmFormat& f, const std::vector<GemmGroup>& groups, Workspace& ws, Epilogue&& epilogue) {
  const int threads = num_threads();
  int64_t max_rows = 0, max_panels = 0;
  const std::vector<GemmTile> tiles = plan_tiles(f, groups, threads, max_rows, max_panels);
  if (tiles.empty()) return;
  const Workspace::Scope scope(ws);
  const int64_t ldc = max_panels * f.nr;
  const int64_t scratch_floats = max_rows * ldc;
  float* const scratch = ws.floats(scratch_floats * threads);
  // K blocks of kKc, or of one k unit where that is longer (the grid types' 256: gemm_kernels.h), or the format's own.
  const int64_t kc_block = f.kc_units > 0 ? f.kc_units * f.unit_k : std::max<int64_t>(kKc, f.unit_k);
  // One expanded weight block per thread (formats with an expanded form): 16 KiB for fp8's dot form (two units).
  const int64_t expanded_floats = f.gemm_expanding ? (f.units(kc_block) * f.expanded_unit_bytes + 63) / 64 * 16 : 0;
  float* const expanded = f.gemm_expanding ? ws.floats(expanded_floats * threads) : nullptr;
  // Activations packed once per run in the format's layout, one micro-panel of units(K) k units per micro-tile (its
  // rows, then zeros), so no tile repacks them and the micro-kernel streams them contiguously:
  // // (micro-tiles, units(K), unit) per group, in bytes; micro-tile i of the row block at r0 is micro-panel
  // r0 / MR + i. Packed a row block per task, so a single large group (the shared expert) packs on every thread.
  // A group of one gathered row takes the micro-panel of the first such group that gathers the same row from the
  // same matrix (its bytes depend on that row alone): at one token every expert's gate/up reads the token's row,
  // packed once instead of once per expert into a workspace that a decode step finds cold.
  std::vector<int64_t> a_off(groups.size(), 0);  // bytes
  int64_t a_bytes = 0;
  std::vector<std::pair<int64_t, int64_t>> pack_tasks;  // (group, first row of a row block)
  std::unordered_map<int64_t, int64_t> one_row_panel;    // source row -> its micro-panel's offset
  const GemmGroup* one_row_source = nullptr;
  for (size_t g = 0; g < groups.size(); ++g) {
    const GemmGroup& gr = groups[g];
    if (gr.m == 0) continue;
    if (gr.m == 1 && gr.a_rows) {
      if (!one_row_source) one_row_source = &gr;
      if (gr.a == one_row_source->a && gr.lda == one_row_source->lda && gr.k == one_row_source->k) {
        const auto [at, first] = one_row_panel.try_emplace(gr.a_rows[0], a_bytes);
        a_off[g] = at->second;
        if (first) {
          a_bytes += f.units(gr.k) * f.a_unit_bytes();
          pack_tasks.emplace_back(static_cast<int64_t>(g), 0);
        }
        continue;
      }
    }
    a_off[g] = a_bytes;
    a_bytes += (gr.m + f.mr - 1) / f.mr * f.units(gr.k) * f.a_unit_bytes();
    const int64_t per = row_block_rows(gr.m, f.mr);
    for (int64_t r0 = 0; r0 < gr.m; r0 += per) pack_tasks.emplace_back(static_cast<int64_t>(g), r0);
  }
  char* const a_packed = reinterpret_cast<char*>(ws.floats((a_bytes + 3) / 4));
  // Groups that all gather their rows from one matrix, some rows more than once (each token's rows of its top-k
  // experts): a format that quantizes its activations into units quantizes each source row once, and the
  // micro-panels copy their rows' units (gather_activation_units: the same bytes). A 512-token prefill over the
  // top 8 of Qwen3-30B-A3B's experts quantizes 512 rows of the gate/up input instead of 4096.
  const int sub_unit = activation_sub_unit(f.format);
  const GemmGroup* source = nullptr;
  int64_t source_rows = 0, gathered = 0;
  for (const GemmGroup& g : groups) {
    if (g.m == 0 || sub_unit == 0) continue;
    if (!g.a_rows || (source && (g.a != source->a || g.lda != source->lda || g.k != source->k))) {
      source = nullptr;
      break;
    }
    source = &g;
    for (int64_t i = 0; i < g.m; ++i) source_rows = std::max(source_rows, g.a_rows[i] + 1);
    gathered += g.m;
  }
  const bool quantize_once = source && gathered > source_rows;
  const int64_t row_bytes = quantize_once ? f.units(source->k) * activation_unit_bytes(f.format, 1) : 0;
  uint8_t* const quantized = quantize_once ? reinterpret_cast<uint8_t*>(ws.floats((source_rows * row_bytes + 3) / 4))
                                           : nullptr;
  if (quantize_once) {
    constexpr int64_t kRowsPerTask = 16;
    parallel_for((source_rows + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t t, int) {
      for (int64_t r = t * kRowsPerTask; r < std::min(source_rows, (t + 1) * kRowsPerTask); ++r)
        f.pack_a(source->a + r * source->lda, source->lda, nullptr, 1, source->k, 1, quantized + r * row_bytes);
    });
  }
  parallel_for(static_cast<int64_t>(pack_tasks.size()), [&](int64_t t, int) {
    const auto [g, r0] = pack_tasks[static_cast<size_t>(t)];
    const GemmGroup& gr = groups[static_cast<size_t>(g)];
    const int64_t rows = std::min(row_block_rows(gr.m, f.mr), gr.m - r0);
    const int64_t micro_panel = f.units(gr.k) * f.a_unit_bytes();
    for (int64_t i = 0; i * f.mr < rows; ++i) {
      const MicroTile mt = micro_tile(rows, f.mr, i);
      char* out = a_packed + a_off[static_cast<size_t>(g)] + (r0 / f.mr + i) * micro_panel;
      if (quantize_once)
        gather_activation_units(quantized, row_bytes, gr.a_rows + r0 + mt.start, mt.rows, sub_unit, f.mr,
                                reinterpret_cast<uint8_t*>(out));
      else if (gr.a_rows) f.pack_a(gr.a, gr.lda, gr.a_rows + r0 + mt.start, mt.rows, gr.k, f.mr, out);
      else f.pack_a(gr.a + (r0 + mt.start) * gr.lda, gr.lda, nullptr, mt.rows, gr.k, f.mr, out);
    }
  });
  parallel_for(static_cast<int64_t>(tiles.size()), [&](int64_t t, int thread) {
    const GemmTile& tile = tiles[static_cast<size_t>(t)];
    const GemmGroup& g = groups[static_cast<size_t>(tile.group)];
    float* c = scratch + thread * scratch_floats;  // (rows, np * NR) result tile
    const int64_t units = f.units(g.k), unit = f.unit_k;
    const int64_t a_micro_panel = units * f.a_unit_bytes();
    const char* const ap = a_packed + a_off[static_cast<size_t>(tile.group)] + tile.r0 / f.mr * a_micro_panel;
    const int64_t panel_bytes = units * f.b_unit_bytes();
    const int64_t micro_tiles = (tile.rows + f.mr - 1) / f.mr;
    const char* const weights = static_cast<const char*>(g.b);
    // 1-3 rows of an int8 format take their few-rows calls over all of K at once: each panel is then one
    // contiguous stream the hardware prefetchers follow, where K blocks of kKc read an int8 panel in runs of 1-2
    // KiB (Q4_0: 1.25 KiB) and jump to the next panel (T = 1: DeepSeek-V2-Lite a few to 25% faster, Mixtral's
    // Q6_K, K = 4096 and 14336, 1.2x; docs/performance.md). Their activation micro-panel (about 1.25 bytes a k and
    // row) is read again for every few panels, from L2 once the weights streaming through have evicted it: little
    // beside the weights (128 columns of 0.5-1 byte a k). The f32 and bf16 formats do so only within
    // kFewWholeKActivationBytes (an f32 row panel: kMr rows of K floats, 96 KiB at K = 2048 and 12 rows).
    int64_t p_done = 0;  // panels already finished over all of K
    const bool whole_k = f.gguf_int8 || a_micro_panel <= kFewWholeKActivationBytes;
    if (tile.rows <= f.few_rows_max && whole_k)
      for (const int per = kFewRowsPanels[tile.rows]; p_done + per <= tile.np; p_done += per)
        f.gemm_few(static_cast<int>(tile.rows), g.k, ap, weights + (tile.p0 + p_done) * panel_bytes, panel_bytes,
                   c + p_done * f.nr, ldc, false);
    // One K block of panel p over every micro-tile of the tile; `next` is the weight block the tile reads after it.
    const bool expand = f.gemm_expanding && micro_tiles > 1;
    float* const own = expand ? expanded + thread * expanded_floats : nullptr;
    // A weight block: panel p of the tile from k0, and its bytes.
    auto block_at = [&](int64_t p, int64_t k0) {
      return weights + (tile.p0 + p) * panel_bytes + k0 / unit * f.b_unit_bytes();
    };
    auto block_bytes = [&](int64_t k0) { return (std::min(kc_block, g.k - k0) + unit - 1) / unit * f.b_unit_bytes(); };
    // Every micro-tile prefetches its share of the next block; a lone one (2-6 rows: T of 8-32) all of it.
    auto run_block = [&](int64_t p, int64_t k0, const char* next, int64_t next_bytes) {
      const int64_t kc = std::min(kc_block, g.k - k0);
      const int64_t a_k0 = k0 / unit * f.a_unit_bytes();
      const char* const b = block_at(p, k0);
      const int64_t share = (next_bytes + 64 * micro_tiles - 1) / (64 * micro_tiles) * 64;
      for (int64_t i = 0; i < micro_tiles; ++i) {
        const MicroTile mt = micro_tile(tile.rows, f.mr, i);
        const char* pf = nullptr;  // this micro-tile's share of the next block
        int64_t pf_bytes = 0;
        if (next) {
          const int64_t begin = std::min(next_bytes, i * share);
          pf = next + begin;
          pf_bytes = std::min(share, next_bytes - begin);
        }
        const void* a = ap + i * a_micro_panel + a_k0;
        float* ci = c + mt.start * ldc + p * f.nr;
        // Several micro-tiles over a format decoded in registers: the first decodes the block into this thread's
        // buffer as it computes, the others run on the decoded block.
        if (!expand) f.gemm(mt.rows, kc, a, b, ci, ldc, k0 > 0, pf, pf_bytes);
        else if (i == 0) f.gemm_expanding(mt.rows, kc, a, b, ci, ldc, k0 > 0, pf, pf_bytes, own);
        else f.gemm_expanded(mt.rows, kc, a, own, ci, ldc, k0 > 0, pf, pf_bytes);
      }
    };
    if (tile.rows > f.few_rows_max) {
      // Prefill: each panel over all of K, so the tile reads a panel's K blocks in address order (see above).
      for (int64_t p = p_done; p < tile.np; ++p)
        for (int64_t k0 = 0; k0 < g.k; k0 += kc_block) {
          const char* next = nullptr;
          int64_t next_bytes = 0;
          if (k0 + kc_block < g.k) {
            next = block_at(p, k0 + kc_block);
            next_bytes = block_bytes(k0 + kc_block);
          } else if (p + 1 < tile.np) {
            next = block_at(p + 1, 0);
            next_bytes = block_bytes(0);
          }
          run_block(p, k0, next, next_bytes);
        }
    } else {
      for (int64_t k0 = 0; p_done < tile.np && k0 < g.k; k0 += kc_block) {
        const int64_t kc = std::min(kc_block, g.k - k0);
        const int64_t a_k0 = k0 / unit * f.a_unit_bytes();
        int64_t p = p_done;
        // 1-3 rows (decode, and 8-32 tokens over many experts): several panels per call for enough independent
        // FMA chains, the panels read side by side, where the format has that variant (f32 up to 3 rows; bf16
        // widening up to 2: with 3 rows the few-rows variant measured 5-8% slower than a lone 3-row micro-tile
        // with its prefetch, docs/performance.md).
        for (const int per = kFewRowsPanels[tile.rows]; p + per <= tile.np; p += per)
          f.gemm_few(static_cast<int>(tile.rows), kc, ap + a_k0, block_at(p, k0), panel_bytes, c + p * f.nr, ldc,
                     k0 > 0);
        for (; p < tile.np; ++p) {
          const char* next = nullptr;  // the next weight block of this tile, and its bytes
          int64_t next_bytes = 0;
          if (p + 1 < tile.np) {
            next = block_at(p + 1, k0);
            next_bytes = block_bytes(k0);
          } else if (k0 + kc < g.k) {
            next = block_at(0, k0 + kc);
            next_bytes = block_bytes(k0 + kc);
          }
          run_block(p, k0, next, next_bytes);
        }
      }
    }
    epilogue(tile, c, ldc);
  });
}

}  // namespace hymoe::kernels

// The decoder's own kernels (ops/Decoding.h) against float64: token and position embedding with bad ids, rotary
// positions with the KV cache append, the SwiGLU gate, and a decode step's attention replayed from one recorded plan at
// key counts on both sides of every split edge, with grouped-query heads and NaN.
#include "ops/Decoding.h"
#include "support/Compare.h"
#include "support/GlContext.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace glnet;

TEST_SUITE("gl") {
  TEST_CASE("token and position embedding gathers rows, NaN for an id or position outside its table") {
    Context& context = test::glContext();
    ProgramCache programs;
    std::mt19937 random = test::generator(900);
    const std::uint32_t vocabulary = 37, columns = 13, positions = 9, rows = 5;
    const std::vector<float> tokens = test::uniformFloats(random, vocabulary * columns), table = test::uniformFloats(random, positions * columns);
    const std::vector<float> ids{0.0f, 36.0f, 37.0f, 2.5f, NAN};  // the last three are no ids
    const Buffer idBuffer = Buffer::of(ids), tokenBuffer = Buffer::of(tokens), positionBuffer = Buffer::of(table);
    // Rows of a decode step, each a sequence at a position of its own (the last past the table).
    const std::vector<std::uint32_t> perRow{4, 0, 8, 2, 9};
    const Buffer rowPositions = Buffer::of(perRow);
    for (const std::uint32_t first : {0u, 3u, 6u, 100u}) {  // 100: the rows' own positions
      for (const bool withPositions : {false, true}) {
        CAPTURE(first);
        CAPTURE(withPositions);
        Buffer y = test::poisoned(rows * columns);
        Plan plan(context.limits());
        RowPositions at{Uniform::u32(0, first), std::nullopt};
        if (first == 100) at.perRow = BufferView(rowPositions);
        plan.record(tokenEmbedding(programs, idBuffer, tokenBuffer, positionBuffer, withPositions ? positions : 0, y, rows, columns, vocabulary, at));
        plan.run();
        const std::vector<float> got = y.read<float>();
        std::vector<double> expected(got.size());
        for (std::uint32_t r = 0; r < rows; ++r) {
          const bool valid = r < 2;
          for (std::uint32_t c = 0; c < columns; ++c) {
            double value = valid ? tokens[static_cast<std::size_t>(ids[r]) * columns + c] : NAN;
            const std::uint32_t position = first == 100 ? perRow[r] : first + r;
            if (withPositions) value += position < positions ? table[position * columns + c] : NAN;
            expected[r * columns + c] = value;
          }
        }
        test::checkNanPropagated(got, expected, 1e-7, 1e-7);
      }
    }
  }

  TEST_CASE("rotary positions rotate queries in place and keys into the cache; values (and GPT-2's keys) are copied") {
    Context& context = test::glContext();
    ProgramCache programs;
    std::mt19937 random = test::generator(901);
    const CacheShape shape{6, 2, 10, 23};
    const std::uint32_t rows = 4, first = 5, half = shape.headSize / 2;
    const std::vector<float> qkv = test::uniformFloats(random, rows * shape.qkvWidth());
    std::vector<float> cosines(shape.context * half), sines(cosines.size());
    for (std::size_t i = 0; i < cosines.size(); ++i) {
      cosines[i] = static_cast<float>(std::cos(0.37 * i));
      sines[i] = static_cast<float>(std::sin(0.37 * i));
    }
    const Buffer cosineBuffer = Buffer::of(cosines), sineBuffer = Buffer::of(sines);
    // Each row a sequence of its own (a decode step of several): its position, and its cache the r-th of the buffer.
    const std::vector<std::uint32_t> perRow{5, 0, 22, 11};
    const Buffer rowPositions = Buffer::of(perRow);
    for (const bool rotary : {true, false}) {
    for (const bool sequences : {false, true}) {
      CAPTURE(rotary);
      CAPTURE(sequences);
      const std::size_t caches = sequences ? rows : 1;
      const auto positionOf = [&](std::uint32_t row) { return sequences ? perRow[row] : first + row; };
      Buffer projections = Buffer::of(qkv);
      // Positions the rows do not reach keep what the cache held.
      Buffer cache = Buffer::of(std::vector<float>(shape.layerFloats() * caches, 7.0f));
      Plan plan(context.limits());
      RowPositions at{Uniform::u32(0, first), std::nullopt};
      if (sequences) at.perRow = BufferView(rowPositions);
      plan.record(appendToCache(programs, projections, cache, rotary, cosineBuffer, sineBuffer, shape, rows, at));
      plan.run();
      std::vector<double> expectedQkv(qkv.begin(), qkv.end()), expectedCache(shape.layerFloats() * caches, 7.0);
      const auto rotated = [&](std::uint32_t row, std::uint32_t head, std::uint32_t f) {
        const std::size_t base = std::size_t{row} * shape.qkvWidth() + head * shape.headSize;
        if (!rotary) return double{qkv[base + f]};
        const std::uint32_t k = f % half, position = positionOf(row);
        const double c = cosines[position * half + k], s = sines[position * half + k];
        const double low = qkv[base + k], high = qkv[base + k + half];
        return f < half ? low * c - high * s : high * c + low * s;
      };
      for (std::uint32_t r = 0; r < rows; ++r) {
        for (std::uint32_t h = 0; h < shape.heads; ++h) {
          for (std::uint32_t f = 0; f < shape.headSize; ++f) expectedQkv[r * shape.qkvWidth() + h * shape.headSize + f] = rotated(r, h, f);
        }
        const std::size_t rowCache = sequences ? r * shape.layerFloats() : 0;
        for (std::uint32_t h = 0; h < shape.kvHeads; ++h) {
          for (std::uint32_t f = 0; f < shape.headSize; ++f) {
            const std::size_t slot = rowCache + (std::size_t{h} * shape.context + positionOf(r)) * shape.headSize + f;
            expectedCache[slot] = rotated(r, shape.heads + h, f);
            expectedCache[std::size_t{shape.kvHeads} * shape.context * shape.headSize + slot] =
                qkv[r * shape.qkvWidth() + (shape.heads + shape.kvHeads + h) * shape.headSize + f];
          }
        }
      }
      test::checkClose(projections.read<float>(), expectedQkv, 1e-6, 1e-6);
      test::checkClose(cache.read<float>(), expectedCache, 1e-6, 1e-6);
    }
    }
  }

  TEST_CASE("the SwiGLU gate is silu(gate)·up, 0 for a large negative gate, NaN in gives NaN out") {
    Context& context = test::glContext();
    ProgramCache programs;
    std::mt19937 random = test::generator(902);
    const std::uint32_t rows = 3, inner = 29;
    std::vector<float> x = test::uniformFloats(random, rows * 2 * inner, -6.0f, 6.0f);
    x[4] = -200.0f;
    x[2 * inner + 7] = NAN;
    const Buffer input = Buffer::of(x);
    Buffer y = test::poisoned(rows * inner);
    Plan plan(context.limits());
    plan.record(swiGlu(programs, input, y, rows, inner));
    plan.run();
    std::vector<double> expected(rows * inner);
    for (std::uint32_t r = 0; r < rows; ++r) {
      for (std::uint32_t i = 0; i < inner; ++i) {
        const double gate = x[r * 2 * inner + i];
        expected[r * inner + i] = gate / (1 + std::exp(-gate)) * x[r * 2 * inner + inner + i];
      }
    }
    test::checkNanPropagated(y.read<float>(), expected, 1e-6, 1e-5);
  }

  TEST_CASE("a decode step's attention matches float64 at every key count of one recorded plan, grouped heads, several sequences, NaN") {
    Context& context = test::glContext();
    ProgramCache programs;
    std::mt19937 random = test::generator(903);
    // Three query heads per KV head; and 130 (more than a group's invocations), over few keys.
    for (const CacheShape shape : {CacheShape{6, 2, 10, 700}, CacheShape{260, 2, 4, 45}}) {
    CAPTURE(shape.heads);
    // Three sequences, each with its query row and cache; row r sees keys[r] keys.
    const std::uint32_t rows = 3;
    const std::vector<float> qkv = test::uniformFloats(random, rows * shape.qkvWidth(), -2.0f, 2.0f);
    std::vector<float> cache = test::uniformFloats(random, rows * shape.layerFloats(), -2.0f, 2.0f);
    // A NaN in the first sequence's second KV head's value at key 40: its three query heads turn NaN once they see key 40.
    const std::size_t values = std::size_t{shape.kvHeads} * shape.context * shape.headSize;
    cache[values + (std::size_t{1} * shape.context + 40) * shape.headSize + 3] = NAN;
    const Buffer projections = Buffer::of(qkv), cacheBuffer = Buffer::of(cache);
    Buffer workspace(DecodeAttention::workspaceBytes(shape, rows));
    Buffer positions(rows * sizeof(std::uint32_t));
    Buffer y = test::poisoned(rows * shape.heads * shape.headSize);
    const float scale = 0.3f;
    const auto attended = [&](std::uint32_t row, std::uint32_t seen) {
      const float* q = qkv.data() + std::size_t{row} * shape.qkvWidth();
      const float* rowCache = cache.data() + row * shape.layerFloats();
      std::vector<double> out(shape.heads * shape.headSize);
      for (std::uint32_t h = 0; h < shape.heads; ++h) {
        const std::uint32_t kvHead = h / (shape.heads / shape.kvHeads);
        std::vector<double> scores(seen);
        double largest = -INFINITY, total = 0;
        for (std::uint32_t j = 0; j < seen; ++j) {
          double dot = 0;
          for (std::uint32_t f = 0; f < shape.headSize; ++f) dot += double{q[h * shape.headSize + f]} * rowCache[(std::size_t{kvHead} * shape.context + j) * shape.headSize + f];
          scores[j] = scale * dot;
          largest = std::max(largest, scores[j]);
        }
        for (double& score : scores) total += score = std::exp(score - largest);
        for (std::uint32_t d = 0; d < shape.headSize; ++d) {
          double sum = 0;
          for (std::uint32_t j = 0; j < seen; ++j) sum += scores[j] / total * rowCache[values + (std::size_t{kvHead} * shape.context + j) * shape.headSize + d];
          out[h * shape.headSize + d] = sum;
        }
      }
      return out;
    };
    for (const bool single : {true, false}) {
      Plan plan(context.limits());
      const int splits = plan.addParameter();
      plan.record(DecodeAttention::record(programs, projections, cacheBuffer, workspace, y, shape, scale, positions, rows,
                                          Uniform::fromParameter(0, splits), single));
      for (const std::uint32_t seen : {1u, 2u, 31u, 33u, 41u, 45u, 63u, 64u, 65u, 129u, 600u, 700u}) {
        if ((single && seen > DecodeAttention::chunk(shape)) || seen > shape.context) continue;
        CAPTURE(single);
        CAPTURE(seen);
        // The other rows see fewer keys: chunks past their last join as nothing.
        const std::vector<std::uint32_t> keys{seen, (seen + 1) / 2, 1};
        y.fill(test::nanPoison);
        positions.upload(std::vector<std::uint32_t>{keys[0] - 1, keys[1] - 1, keys[2] - 1});
        plan.setParameter(splits, DecodeAttention::splits(seen, shape));
        plan.run();
        const std::vector<float> got = y.read<float>();
        const std::size_t width = std::size_t{shape.heads} * shape.headSize;
        for (std::uint32_t row = 0; row < rows; ++row) {
          CAPTURE(row);
          const std::vector<float> gotRow(got.begin() + row * width, got.begin() + (row + 1) * width);
          const std::vector<double> expected = attended(row, keys[row]);
          if (row == 0 && seen > 40) {
            test::checkNanPropagated(gotRow, expected, 1e-6, 1e-5);
          } else {
            test::checkClose(gotRow, expected, 1e-6, 1e-5);
          }
        }
      }
    }
    }
  }
}

TEST_SUITE("gl") {
  TEST_CASE("a decode step's dense layer with its norm or gate fused into its read matches float64 for one or several rows, NaN in gives NaN out") {
    Context& context = test::glContext();
    ProgramCache programs;
    std::mt19937 random = test::generator(904);
    // K 44: one team per output; K 1028: several (TEAMS_PER_ROW), some of them past the row's last run.
    for (const std::uint32_t inputs : {44u, 1028u}) {
    const std::uint32_t outputs = 37;
    for (const GemvInput input : {GemvInput::plain, GemvInput::layerNorm, GemvInput::rmsNorm, GemvInput::swiGlu}) {
      // Several rows (sequences decoded together) read each weight once; the norms take one row.
      const bool normed = input == GemvInput::layerNorm || input == GemvInput::rmsNorm;
      for (const std::uint32_t rows : {1u, 3u}) {
      if (normed && rows > 1) continue;
      for (const bool residual : {false, true}) {
        for (const bool poisoned : {false, true}) {
          CAPTURE(kindName(input));
          CAPTURE(rows);
          CAPTURE(residual);
          CAPTURE(poisoned);
          CAPTURE(inputs);
          const std::uint32_t xSize = input == GemvInput::swiGlu ? 2 * inputs : inputs;
          std::vector<float> x = test::uniformFloats(random, rows * xSize, -2.0f, 2.0f);
          if (poisoned) x[5] = NAN;  // in the first row
          const std::vector<float> w = test::uniformFloats(random, outputs * inputs), b = test::uniformFloats(random, outputs),
                                   r = test::uniformFloats(random, rows * outputs), gamma = test::uniformFloats(random, inputs, 0.5f, 1.5f),
                                   beta = test::uniformFloats(random, inputs);
          GemvLayer layer;
          layer.input = input;
          layer.rows = rows;
          layer.epsilon = 1e-5f;
          layer.residual = residual;
          if (!residual) layer.after = Pointwise{PointwiseKind::geluTanh};
          const Buffer xBuffer = Buffer::of(x), wBuffer = Buffer::of(w), bBuffer = Buffer::of(b), rBuffer = Buffer::of(r),
                       gammaBuffer = Buffer::of(gamma), betaBuffer = Buffer::of(beta);
          Buffer y = poisoned ? Buffer::of(std::vector<float>(rows * outputs, 0.0f)) : test::poisoned(rows * outputs);
          const BufferView rView = rBuffer, gammaView = gammaBuffer, betaView = betaBuffer;
          Plan plan(context.limits());
          plan.record(gemv(programs, layer, xBuffer, wBuffer, bBuffer, y, outputs, inputs, &rView, &gammaView, &betaView));
          plan.run();
          const std::vector<float> got = y.read<float>();
          for (std::uint32_t row = 0; row < rows; ++row) {
            CAPTURE(row);
            const float* xRow = x.data() + std::size_t{row} * xSize;
            // x' in float64 as the kernel makes it.
            std::vector<double> xs(inputs);
            double mean = 0, squares = 0;
            if (input == GemvInput::layerNorm) {
              for (std::uint32_t k = 0; k < inputs; ++k) mean += xRow[k];
              mean /= inputs;
            }
            for (std::uint32_t k = 0; k < inputs; ++k) squares += (xRow[k] - mean) * (xRow[k] - mean);
            const double scale = 1 / std::sqrt(squares / inputs + 1e-5);
            for (std::uint32_t k = 0; k < inputs; ++k) {
              switch (input) {
                case GemvInput::plain: xs[k] = xRow[k]; break;
                case GemvInput::layerNorm: xs[k] = (xRow[k] - mean) * scale * gamma[k] + beta[k]; break;
                case GemvInput::rmsNorm: xs[k] = xRow[k] * scale * gamma[k]; break;
                case GemvInput::swiGlu: xs[k] = xRow[k] / (1 + std::exp(-double{xRow[k]})) * xRow[inputs + k]; break;
              }
            }
            std::vector<double> expected(outputs);
            for (std::uint32_t n = 0; n < outputs; ++n) {
              double sum = b[n] + (residual ? r[row * outputs + n] : 0.0);
              for (std::uint32_t k = 0; k < inputs; ++k) sum += double{w[n * inputs + k]} * xs[k];
              expected[n] = residual ? sum : layer.after(sum);
            }
            const std::vector<float> gotRow(got.begin() + row * outputs, got.begin() + (row + 1) * outputs);
            if (poisoned && row == 0) {
              // A NaN in x reaches every output of its row (through the norm's statistics, or the one product that reads it).
              for (const float value : gotRow) CHECK(std::isnan(value));
            } else {
              test::checkClose(gotRow, expected, 1e-5, 1e-5);
            }
          }
        }
      }
      }
    }
    }
    CHECK_THROWS_WITH(checkGemvInputs(42, "a layer's input size"), doctest::Contains("not a multiple of 4"));
  }

  TEST_CASE("a q/k/v layer appending to the cache writes each key and value at the position, the rest untouched") {
    Context& context = test::glContext();
    ProgramCache programs;
    std::mt19937 random = test::generator(906);
    const CacheShape shape{6, 2, 8, 13};
    const std::uint32_t inputs = 20, outputs = shape.qkvWidth();
    const std::vector<float> x = test::uniformFloats(random, inputs), w = test::uniformFloats(random, outputs * inputs),
                             b = test::uniformFloats(random, outputs);
    const Buffer xBuffer = Buffer::of(x), wBuffer = Buffer::of(w), bBuffer = Buffer::of(b);
    Buffer cache = Buffer::of(std::vector<float>(shape.layerFloats(), 7.0f));
    Buffer y = test::poisoned(outputs);
    Plan plan(context.limits());
    Buffer position(sizeof(std::uint32_t));
    const CacheAppend append{cache, shape, position};
    plan.record(gemv(programs, GemvLayer{}, xBuffer, wBuffer, bBuffer, y, outputs, inputs, nullptr, nullptr, nullptr, &append));
    std::vector<double> expectedCache(shape.layerFloats(), 7.0);
    for (const std::uint32_t at : {5u, 12u}) {
      position.upload(std::vector<std::uint32_t>{at});
      plan.run();
      std::vector<double> expected(outputs);
      for (std::uint32_t n = 0; n < outputs; ++n) {
        double sum = b[n];
        for (std::uint32_t k = 0; k < inputs; ++k) sum += double{w[n * inputs + k]} * x[k];
        expected[n] = sum;
      }
      test::checkClose(y.read<float>(), expected, 1e-5, 1e-5);
      const std::uint32_t queries = shape.heads * shape.headSize, kv = shape.kvHeads * shape.headSize;
      for (std::uint32_t m = 0; m < 2 * kv; ++m) {
        const std::uint32_t part = m / kv, within = m % kv;
        expectedCache[std::size_t{part} * kv * shape.context + (within / shape.headSize * shape.context + at) * shape.headSize +
                      within % shape.headSize] = expected[queries + m];
      }
      test::checkClose(cache.read<float>(), expectedCache, 1e-5, 1e-5);
    }
  }

  TEST_CASE("a decode step's dense layer reads fp16 and bf16 weights as packWeights stores them") {
    Context& context = test::glContext();
    ProgramCache programs;
    std::mt19937 random = test::generator(905);
    const std::uint32_t outputs = 29, inputs = 516;
    const std::vector<float> x = test::uniformFloats(random, inputs), w = test::uniformFloats(random, outputs * inputs, -3.0f, 3.0f),
                             b = test::uniformFloats(random, outputs);
    const Buffer xBuffer = Buffer::of(x), bBuffer = Buffer::of(b);
    for (const WeightStorage storage : {WeightStorage::fp32, WeightStorage::fp16, WeightStorage::bf16}) {
      CAPTURE(kindName(storage));
      const Buffer wBuffer = Buffer::of(packWeights(w, storage));
      CHECK(wBuffer.bytes() == w.size() * (storage == WeightStorage::fp32 ? 4 : 2));
      Buffer y = test::poisoned(outputs);
      GemvLayer layer;
      layer.weights = storage;
      Plan plan(context.limits());
      plan.record(gemv(programs, layer, xBuffer, wBuffer, bBuffer, y, outputs, inputs));
      plan.run();
      std::vector<double> expected(outputs);
      for (std::uint32_t n = 0; n < outputs; ++n) {
        double sum = b[n];
        for (std::uint32_t k = 0; k < inputs; ++k) sum += double{storedWeight(w[n * inputs + k], storage)} * x[k];
        expected[n] = sum;
      }
      test::checkClose(y.read<float>(), expected, 1e-5, 1e-5);
      // The rounding is real: fp16 and bf16 keep 11 and 8 significant bits.
      if (storage != WeightStorage::fp32) CHECK(storedWeight(w[0], storage) != w[0]);
    }
  }
}

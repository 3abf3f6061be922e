#include "ops/Dense.h"
#include "data/GpuImages.h"
#include "ops/Normalize.h"
#include "ops/Optimizer.h"
#include "ops/Softmax.h"
#include "ops/SplitK.h"
#include "ref/Reference.h"
#include "support/Compare.h"
#include "support/GlContext.h"
#include "support/Random.h"

#include <doctest/doctest.h>

using namespace glnet;

TEST_SUITE("gl") {
  TEST_CASE("Normalize.glsl matches the reference at odd sizes and offsets, one pixel or four per invocation, per channel") {
    Context& context = test::glContext();
    auto random = test::generator(10);
    ProgramCache programs;
    const NormalizeOp normalize(programs);
    // MNIST's one mean and deviation at any offset; three channels of 2x2 planes from a whole image on.
    struct FormatCase {
      InputFormat format;
      std::uint32_t pixelsPerImage;
      std::vector<std::size_t> firsts;
    };
    const std::vector<FormatCase> formats = {{{{0.1307f}, {0.3081f}}, 784, {0, 1, 3, 785, 1568}},
                                             {{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}}, 12, {0, 12, 36}}};
    for (const FormatCase& f : formats)
    for (const std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{784}, std::size_t{7 * 784 + 3}, std::size_t{7 * 784}}) {
      for (const std::size_t first : f.firsts) {
        for (const bool wordAligned : {false, true}) {
          if (wordAligned && first % 4 != 0) continue;
          CAPTURE(f.format.channels());
          CAPTURE(count);
          CAPTURE(first);
          CAPTURE(wordAligned);
          const auto pixels = test::randomBytes(random, first + count + 5);
          std::vector<std::uint8_t> padded = pixels;
          padded.resize((pixels.size() + 3) / 4 * 4);
          Buffer input = Buffer::of(padded);
          Buffer output = test::poisoned(count);
          const Uniform firstPixel = Uniform::u32(NormalizeOp::firstPixelLocation, static_cast<std::uint32_t>(first));
          const Dispatch dispatch = normalize(input, output, static_cast<std::uint32_t>(count), firstPixel, f.format, f.pixelsPerImage, wordAligned);
          if (wordAligned && count % 4 == 0) {  // four pixels per invocation: a quarter of the invocations
            const Dispatch single = normalize(input, output, static_cast<std::uint32_t>(count), firstPixel, f.format, f.pixelsPerImage, false);
            CHECK(dispatch.program != single.program);
          }
          Plan plan(context.limits());
          plan.record(dispatch);
          plan.run();
          // One fp32 divide and multiply-add on values near 1: a few ulps.
          test::checkClose(output.read<float>(), ref::normalize(pixels, first, count, f.format, f.pixelsPerImage), 1e-6, 1e-6);
        }
      }
    }
  }

  TEST_CASE("SplitSum.glsl adds every slice, one invocation per sum or several sharing a sum, its tail apart, written or added, NaN where a slice holds one") {
    Context& context = test::glContext();
    auto random = test::generator(11);
    ProgramCache programs;
    const SplitSumOp sum(programs);
    struct SumCase {
      std::uint32_t count, tailCount, splits;
    };
    // Lanes per sum: 16 (37 sums of 300 slices), 8 (a tail, 40 slices), 1 (3 slices; and 140 001 sums, which fill the GPU alone).
    for (const SumCase& c : {SumCase{37, 0, 300}, SumCase{1001, 7, 40}, SumCase{5, 2, 3}, SumCase{140001, 0, 9}}) {
      for (const bool accumulate : {false, true}) {
        CAPTURE(c.count);
        CAPTURE(c.splits);
        CAPTURE(accumulate);
        const std::uint32_t slice = c.count + c.tailCount;
        std::vector<float> partial = test::uniformFloats(random, std::size_t{slice} * c.splits);
        const std::uint32_t poisoned = slice / 2;  // a NaN in the last slice of one sum
        partial[std::size_t{c.splits - 1} * slice + poisoned] = NAN;
        const std::vector<float> earlier = test::uniformFloats(random, slice);
        std::vector<double> expected(slice);
        for (std::uint32_t i = 0; i < slice; ++i) {
          double total = accumulate ? earlier[i] : 0.0;
          for (std::uint32_t z = 0; z < c.splits; ++z) total += partial[std::size_t{z} * slice + i];
          expected[i] = total;
        }
        const Buffer partialBuffer = Buffer::of(partial);
        Buffer out = Buffer::of(std::vector<float>(earlier.begin(), earlier.begin() + c.count));
        Buffer tail = Buffer::of(c.tailCount ? std::vector<float>(earlier.begin() + c.count, earlier.end()) : std::vector<float>{0.0f});
        if (!accumulate) {
          out.fill(test::nanPoison);
          tail.fill(test::nanPoison);
        }
        Plan plan(context.limits());
        plan.record(c.tailCount ? sum(partialBuffer, out, c.count, tail, c.tailCount, c.splits, accumulate)
                                : sum(partialBuffer, out, c.count, c.splits, accumulate));
        plan.run();
        std::vector<float> gpu = out.read<float>();
        if (c.tailCount) {
          const std::vector<float> tailValues = tail.read<float>();
          gpu.insert(gpu.end(), tailValues.begin(), tailValues.end());
        }
        REQUIRE(gpu.size() == expected.size());
        CHECK(std::isnan(gpu[poisoned]));
        gpu[poisoned] = 0.0f;
        expected[poisoned] = 0.0;
        // Sums of up to 300 terms of magnitude 1.
        test::checkClose(gpu, expected, 1e-5, 1e-5);
      }
    }
  }

  TEST_CASE("ForwardPass.glsl matches the dense reference for every activation and odd shapes") {
    Context& context = test::glContext();
    auto random = test::generator(11);
    for (const Activation activation : {Activation::none, Activation::relu, Activation::tanh, Activation::sigmoid}) {
      ProgramCache programs;
      const DenseOp dense(programs, activation);
      for (const std::uint32_t rows : {1u, 7u, 1000u}) {
        for (const auto& [inputs, outputs] : std::vector<std::pair<std::uint32_t, std::uint32_t>>{
                 {1, 1}, {784, 10}, {33, 10}, {10, 33}, {784, 128}, {17, 65}}) {
          if (rows == 1000 && inputs * outputs > 784 * 128 / 2 && activation != Activation::relu) continue;
          CAPTURE(activationName(activation));
          CAPTURE(rows);
          CAPTURE(inputs);
          CAPTURE(outputs);
          const auto x = test::uniformFloats(random, std::size_t{rows} * inputs);
          const auto w = test::uniformFloats(random, std::size_t{outputs} * inputs, -0.5f, 0.5f);
          const auto b = test::uniformFloats(random, outputs);
          Buffer xBuffer = Buffer::of(x), wBuffer = Buffer::of(w), bBuffer = Buffer::of(b);
          Buffer y = test::poisoned(std::size_t{rows} * outputs);
          Plan plan(context.limits());
          plan.record(dense.forward(xBuffer, wBuffer, bBuffer, y, {rows, inputs, outputs}));
          plan.run();
          // fp32 accumulation of K products of magnitude ≤ 0.5: error grows like sqrt(K)·ulp; 1e-5 + 1e-4 rel
          // covers K = 784 with margin.
          test::checkClose(y.read<float>(), ref::dense(test::widen(x), w, b, rows, inputs, outputs, activation), 1e-5, 1e-4);
        }
      }
    }
  }

  TEST_CASE("DenseFewRows.glsl (a batch of 1 to 4 rows) matches the dense reference, vec4 runs or not, with and without bias") {
    Context& context = test::glContext();
    auto random = test::generator(14);
    for (const bool hasBias : {true, false}) {
      ProgramCache programs;
      const DenseOp dense(programs, hasBias ? Activation::relu : Activation::none, hasBias);
      for (const std::uint32_t rows : {1u, 2u, 3u, 4u}) {
        // K a multiple of 4 (vec4 runs) or not; outputs not a multiple of a group's; K longer than a group's invocations.
        for (const auto& [inputs, outputs] : std::vector<std::pair<std::uint32_t, std::uint32_t>>{{7, 3}, {1024, 13}, {4099, 9}, {513, 1000}}) {
          CAPTURE(hasBias);
          CAPTURE(rows);
          CAPTURE(inputs);
          CAPTURE(outputs);
          REQUIRE(DenseOp::fewRows({rows, inputs, outputs}));
          const auto x = test::uniformFloats(random, std::size_t{rows} * inputs);
          const auto w = test::uniformFloats(random, std::size_t{outputs} * inputs, -0.5f, 0.5f);
          const auto b = hasBias ? test::uniformFloats(random, outputs) : std::vector<float>(outputs, 0.0f);
          Buffer xBuffer = Buffer::of(x), wBuffer = Buffer::of(w), bBuffer = Buffer::of(b);
          Buffer y = test::poisoned(std::size_t{rows} * outputs);
          Plan plan(context.limits());
          const std::vector<Dispatch> dispatches = dense.forward(xBuffer, wBuffer, bBuffer, y, {rows, inputs, outputs});
          REQUIRE(dispatches.size() == 1);
          CHECK(dispatches[0].label.find("few rows") != std::string::npos);
          plan.record(dispatches);
          plan.run();
          // fp32 sums of up to 4099 products of magnitude ≤ 0.5 in a different order than the reference's.
          test::checkClose(y.read<float>(), ref::dense(test::widen(x), w, b, rows, inputs, outputs, hasBias ? Activation::relu : Activation::none),
                           1e-5, 1e-4);
        }
      }
    }
  }

  TEST_CASE("Softmax.glsl softmax and argmax match the reference, extreme logits included") {
    Context& context = test::glContext();
    auto random = test::generator(12);
    ProgramCache programs;
    const SoftmaxOp softmax(programs);
    for (const std::uint32_t rows : {1u, 7u, 1000u}) {
      for (const std::uint32_t columns : {1u, 10u, 33u}) {
        CAPTURE(rows);
        CAPTURE(columns);
        auto logits = test::uniformFloats(random, std::size_t{rows} * columns, -20.0f, 20.0f);
        logits[0] = 500.0f;  // exp overflows without the max shift
        Buffer z = Buffer::of(logits);
        Buffer p = test::poisoned(logits.size());
        Buffer classes(std::size_t{rows + 3} * sizeof(std::uint32_t));
        classes.fill(0xffffffffu);
        Plan plan(context.limits());
        plan.record(softmax.softmax(z, p, rows, columns));
        plan.record(softmax.argmax(z, classes, rows, columns, Uniform::u32(SoftmaxOp::firstRowLocation, 3)));
        plan.run();
        // exp in fp32 on shifted logits ≤ 0, then one normalising divide.
        test::checkClose(p.read<float>(), ref::softmax(test::widen(logits), rows, columns), 1e-6, 1e-5);
        const auto gpuClasses = classes.read<std::uint32_t>();
        const auto expected = ref::argmax(test::widen(logits), rows, columns);
        for (std::size_t r = 0; r < 3; ++r) CHECK(gpuClasses[r] == 0xffffffffu);
        for (std::size_t r = 0; r < rows; ++r) REQUIRE(gpuClasses[r + 3] == expected[r]);
      }
    }
  }
}

TEST_SUITE("gl") {
  TEST_CASE("augmented gathering shifts and flips each [C, H, W] image as its packed draw says, zeros uncovered") {
    Context& context = test::glContext();
    ProgramCache programs;
    auto random = test::generator(61);
    const std::uint32_t count = 5, channels = 2, height = 5, width = 7, pixels = channels * height * width;
    std::vector<std::uint8_t> bytes(count * pixels);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(random() % 256);
    const std::vector<std::uint32_t> indices{3, 0, 4, 1, 2};
    const std::vector<std::array<int, 3>> draws{{0, 0, 0}, {2, -1, 1}, {-3, 2, 0}, {1, 4, 1}, {-6, -5, 1}};
    std::vector<std::uint32_t> packed;
    for (const auto& [dx, dy, flip] : draws) packed.push_back(GatherOp::packAugmentation(dx, dy, flip != 0));
    const GpuImages images = uploadImages(ImageSet{count, height, width * channels, bytes});
    const Buffer indexBuffer = Buffer::of(indices), augment = Buffer::of(packed);
    const std::uint32_t rows = 4, firstRow = 1;
    Buffer out(rows * pixels * sizeof(float));
    out.fill(test::nanPoison);
    Plan plan(context.limits());
    const int first = plan.addParameter(firstRow);
    const InputFormat format{{0.25f, 0.5f}, {0.5f, 0.25f}};  // one mean and deviation per channel
    plan.record(GatherOp(programs).augmentedImages(images.pixels, indexBuffer, augment, out, rows, pixels, height, width, first, format));
    plan.run();
    std::vector<double> expected;
    for (std::uint32_t r = 0; r < rows; ++r) {
      const auto& [dx, dy, flip] = draws[firstRow + r];
      for (std::uint32_t c = 0; c < channels; ++c) {
        for (std::uint32_t y = 0; y < height; ++y) {
          for (std::uint32_t x = 0; x < width; ++x) {
            const int sx = static_cast<int>(flip ? width - 1 - x : x) - dx, sy = static_cast<int>(y) - dy;
            const bool inside = sx >= 0 && sy >= 0 && sx < static_cast<int>(width) && sy < static_cast<int>(height);
            const double pixel = inside ? bytes[indices[firstRow + r] * pixels + (c * height + static_cast<std::uint32_t>(sy)) * width + static_cast<std::uint32_t>(sx)] : 0;
            expected.push_back((pixel / 255.0 - format.mean[c]) / format.std[c]);
          }
        }
      }
    }
    test::checkClose(out.read<float>(), expected, 1e-6, 1e-6);
  }
}

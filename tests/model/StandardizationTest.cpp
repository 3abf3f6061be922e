// The input format training records: one mean and deviation per channel of RGB images, one for gray images, and
// metadata that reads back as written (lists of one per channel).
#include "base/check.h"
#include "train/Trainer.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace glnet;

TEST_CASE("standardization gives RGB images a mean and deviation per channel and gray images one") {
  // Two 1x2 RGB images: red 0 and 255 everywhere, green 51 in all four pixels, blue 0, 0, 255, 255.
  ImageSet rgb{2, 1, 2, {0, 0, 51, 51, 0, 0, 255, 255, 51, 51, 255, 255}};
  rgb.channels = 3;
  const InputFormat format = standardization(rgb);
  REQUIRE(format.channels() == 3);
  CHECK(format.mean[0] == doctest::Approx(0.5));
  CHECK(format.std[0] == doctest::Approx(0.5));
  CHECK(format.mean[1] == doctest::Approx(0.2));
  CHECK(format.std[1] == doctest::Approx(std::sqrt(1e-12)).epsilon(1e-3));  // a constant channel: the floor, not 0
  CHECK(format.mean[2] == doctest::Approx(0.5));

  const ImageSet gray{2, 1, 2, {0, 255, 0, 255}};
  const InputFormat one = standardization(gray);
  REQUIRE(one.channels() == 1);
  CHECK(one.mean[0] == doctest::Approx(0.5));
  CHECK(one.std[0] == doctest::Approx(0.5));
}

TEST_CASE("input formats read back from metadata as written, and broken ones are refused in one line") {
  const InputFormat rgb{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
  const InputFormat read = inputFormatOf({{"input_mean", formatValues(rgb.mean)}, {"input_std", formatValues(rgb.std)}}, "m");
  CHECK(read.mean == rgb.mean);
  CHECK(read.std == rgb.std);
  const InputFormat spread = inputFormatOf({{"input_mean", "0.5"}, {"input_std", "0.1,0.2,0.3"}}, "m");
  CHECK(spread.mean == std::vector<float>{0.5f, 0.5f, 0.5f});
  const InputFormat absent = inputFormatOf({}, "m");
  CHECK(absent.mean == std::vector<float>{0.0f});
  CHECK(absent.std == std::vector<float>{1.0f});
  CHECK_THROWS_WITH(inputFormatOf({{"input_mean", "0.1,0.2"}, {"input_std", "0.1,0.2,0.3"}}, "m"),
                    "m: metadata input_mean and input_std give different numbers of channels");
  CHECK_THROWS_WITH(inputFormatOf({{"input_mean", "0.1,,0.2"}}, "m"), "m: metadata input_mean is not a finite number or a list of 1 to 4 of them");
  CHECK_THROWS_WITH(inputFormatOf({{"input_std", "1,1,1,1,1"}}, "m"), "m: metadata input_std is not a finite number or a list of 1 to 4 of them");
  CHECK_THROWS_WITH(inputFormatOf({{"input_std", "0.5,-1"}}, "m"), "m: metadata input_std must be positive");
}

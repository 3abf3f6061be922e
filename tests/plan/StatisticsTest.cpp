#include "plan/Statistics.h"

#include <doctest/doctest.h>

using namespace glnet;

TEST_CASE("timing summaries: the median of odd and even counts, nearest-rank percentiles, nothing from nothing") {
  const Statistics odd = summarize({5, 1, 4, 2, 3});
  CHECK(odd.runs == 5);
  CHECK(odd.median == 3);
  CHECK(odd.p10 == 1);
  CHECK(odd.p90 == 5);
  const Statistics even = summarize({4, 1, 3, 2});
  CHECK(even.median == 2.5);
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);
  const Statistics many = summarize(hundred);
  CHECK(many.p10 == 10);
  CHECK(many.p90 == 90);
  CHECK(many.median == 50.5);
  const Statistics none = summarize({});
  CHECK(none.runs == 0);
  CHECK(none.median == 0);
}

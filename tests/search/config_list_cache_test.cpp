// The configuration lists shared by a search's workers (src/search/config_list_cache.h).
#include "config_list_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mugraph/frontend.h"
#include "search_fixtures.h"

namespace mugraph::search_detail {
namespace {

std::shared_ptr<const ConfigList> list_of(size_t n) {
  auto l = std::make_shared<ConfigList>();
  l->configs.resize(n);
  l->floors.resize(n);
  return l;
}

TEST(ConfigListCache, KeepsListsByKeyUntilItIsFull) {
  const int64_t one = config_list_bytes(*list_of(1000));
  EXPECT_GE(one, static_cast<int64_t>(1000 * (sizeof(KernelConfig) + sizeof(double))));
  ConfigListCache cache(3 * one + 1000);
  EXPECT_EQ(cache.find("a"), nullptr);
  const auto a = list_of(1000), b = list_of(1000);
  cache.insert("a", a);
  cache.insert("b", b);
  EXPECT_EQ(cache.find("a"), a);
  EXPECT_EQ(cache.find("b"), b);
  EXPECT_GT(cache.bytes(), 2 * one);
  // Another worker made the same list: the first one stays, counted once.
  const int64_t before = cache.bytes();
  cache.insert("a", list_of(1000));
  EXPECT_EQ(cache.find("a"), a);
  EXPECT_EQ(cache.bytes(), before);
  // A list past the capacity empties the cache first.
  cache.insert("c", list_of(1000));
  cache.insert("d", list_of(1000));
  EXPECT_EQ(cache.find("a"), nullptr);
  EXPECT_NE(cache.find("d"), nullptr);
  EXPECT_LE(cache.bytes(), 3 * one + 1000);
  cache.clear();
  EXPECT_EQ(cache.find("d"), nullptr);
  EXPECT_EQ(cache.bytes(), 0);
}

TEST(ConfigListCache, TakesAQuarterOfTheMemoryLimit) {
  EXPECT_EQ(config_list_cache_bytes(int64_t{16} << 30), int64_t{4} << 30);
  EXPECT_EQ(config_list_cache_bytes(int64_t{6} << 30), int64_t{3} << 29);
  EXPECT_EQ(config_list_cache_bytes(0), int64_t{4} << 30) << "no limit known";
}

TEST(ConfigListCache, WorkersShareIt) {
  ConfigListCache cache(int64_t{1} << 30);
  std::atomic<int> found{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w)
    workers.emplace_back([&, w] {
      for (int i = 0; i < 2000; ++i) {
        const std::string key = std::to_string((i * 7 + w) % 500);
        if (cache.find(key))
          ++found;
        else
          cache.insert(key, list_of(10));
      }
    });
  for (auto& t : workers) t.join();
  EXPECT_GE(found.load(), 8000 - 4 * 500);
  for (int k = 0; k < 500; ++k) EXPECT_NE(cache.find(std::to_string(k)), nullptr) << k;
}

TEST(ConfigListCache, KernelTasksOfOneSearchShareTheirLists) {
  // Two generators (two workers) of one search: the second makes no list the first made.
  Graph program = parse_program(search_testing::kSmallRmsNormLinear);
  SearchContext ctx(program, search_testing::small_model_bound_options());
  Generator first(ctx), second(ctx);
  std::atomic<bool> stop{false};
  TaskOutput out;
  ASSERT_TRUE(first.run(ctx.root(), out, stop));
  const int64_t bytes = ctx.config_lists().bytes();
  EXPECT_GT(bytes, 0);
  TaskOutput again;
  ASSERT_TRUE(second.run(ctx.root(), again, stop));
  EXPECT_EQ(ctx.config_lists().bytes(), bytes);
  ASSERT_EQ(again.children.size(), out.children.size());
  for (size_t i = 0; i < out.children.size(); ++i) {
    if (!out.children[i].configs) continue;
    EXPECT_EQ(again.children[i].configs, out.children[i].configs) << i;
  }
}

}  // namespace
}  // namespace mugraph::search_detail

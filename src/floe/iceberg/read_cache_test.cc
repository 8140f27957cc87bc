// The read cache (read_cache.h) over a FileIO that counts what reaches it: every byte
// read through the cache equals the file's, a range read once is not read from the
// inner FileIO again, a missing span is one inner read, and past its budget or for
// other files the cache reads through. Seeded (FLOE_TEST_SEED), several threads.

#include "floe/iceberg/read_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <arrow/buffer.h>
#include <gtest/gtest.h>

namespace floe::iceberg {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kMiB = int64_t{1} << 20;

// Counts the opens and reads that reach the local FileIO it wraps.
class CountingIO : public FileIO {
 public:
  std::atomic<int> opens{0};
  std::atomic<int> live{0};  // inputs open now
  std::atomic<int> reads{0};
  std::atomic<int64_t> bytes{0};

  arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> OpenInput(
      const std::string& location) override {
    ++opens;
    ARROW_ASSIGN_OR_RAISE(auto input, local_->OpenInput(location));
    return std::make_shared<Input>(std::move(input), this);
  }
  arrow::Result<std::string> ReadAll(const std::string& location) override {
    ++opens;
    ++reads;
    ARROW_ASSIGN_OR_RAISE(std::string all, local_->ReadAll(location));
    bytes += static_cast<int64_t>(all.size());
    return all;
  }
  arrow::Result<std::shared_ptr<arrow::io::OutputStream>> OpenOutput(
      const std::string& location) override {
    return local_->OpenOutput(location);
  }
  arrow::Status WriteAtomically(const std::string& location, std::string_view data,
                                bool exclusive) override {
    return local_->WriteAtomically(location, data, exclusive);
  }
  arrow::Status Sync(const std::string& location) override {
    return local_->Sync(location);
  }
  arrow::Result<bool> Exists(const std::string& location) override {
    return local_->Exists(location);
  }
  arrow::Status Delete(const std::string& location) override {
    return local_->Delete(location);
  }
  arrow::Result<std::vector<FileEntry>> List(const std::string& prefix) override {
    return local_->List(prefix);
  }

 private:
  class Input : public arrow::io::RandomAccessFile {
   public:
    Input(std::shared_ptr<arrow::io::RandomAccessFile> inner, CountingIO* io)
        : inner_(std::move(inner)), io_(io) {
      ++io_->live;
    }
    ~Input() override { --io_->live; }
    Input(const Input&) = delete;
    Input& operator=(const Input&) = delete;
    arrow::Status Close() override { return inner_->Close(); }
    bool closed() const override { return inner_->closed(); }
    arrow::Result<int64_t> Tell() const override { return inner_->Tell(); }
    arrow::Status Seek(int64_t p) override { return inner_->Seek(p); }
    arrow::Result<int64_t> GetSize() override { return inner_->GetSize(); }
    arrow::Result<int64_t> Read(int64_t n, void* out) override {
      return Count(inner_->Read(n, out));
    }
    arrow::Result<std::shared_ptr<arrow::Buffer>> Read(int64_t n) override {
      ARROW_ASSIGN_OR_RAISE(auto b, inner_->Read(n));
      Tally(b->size());
      return b;
    }
    arrow::Result<int64_t> ReadAt(int64_t p, int64_t n, void* out) override {
      return Count(inner_->ReadAt(p, n, out));
    }
    arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t p, int64_t n) override {
      ARROW_ASSIGN_OR_RAISE(auto b, inner_->ReadAt(p, n));
      Tally(b->size());
      return b;
    }

   private:
    arrow::Result<int64_t> Count(arrow::Result<int64_t> n) {
      if (n.ok()) Tally(*n);
      return n;
    }
    void Tally(int64_t n) {
      ++io_->reads;
      io_->bytes += n;
    }
    std::shared_ptr<arrow::io::RandomAccessFile> inner_;
    CountingIO* io_;
  };
  std::shared_ptr<FileIO> local_ = MakeLocalFileIO();
};

class ReadCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* env = std::getenv("FLOE_TEST_SEED");
    seed_ = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::printf("FLOE_TEST_SEED=%llu\n", static_cast<unsigned long long>(seed_));
    dir_ = fs::temp_directory_path() /
           ("floe-read-cache-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "cache");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A file of `size` seeded bytes under dir_; returns its path.
  std::string MakeFile(const std::string& name, int64_t size) {
    std::mt19937_64 rng(seed_ ^ std::hash<std::string>{}(name));
    std::string bytes(static_cast<size_t>(size), '\0');
    for (auto& c : bytes) c = static_cast<char>(rng());
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    contents_[path] = bytes;
    return path;
  }

  std::shared_ptr<FileIO> Cache(int64_t max_bytes = int64_t{1} << 30,
                                int64_t min_free_bytes = 0) {
    ReadCacheOptions options;
    options.dir = dir_ / "cache";
    options.max_bytes = max_bytes;
    options.min_free_bytes = min_free_bytes;
    options.local_too = true;
    auto io = MakeReadCachingFileIO(counting_, options);
    EXPECT_TRUE(io.ok()) << io.status().ToString();
    return *io;
  }

  std::string Read(FileIO& io, const std::string& path, int64_t at, int64_t n) {
    auto input = io.OpenInput(path);
    EXPECT_TRUE(input.ok()) << input.status().ToString();
    auto buffer = (*input)->ReadAt(at, n);
    EXPECT_TRUE(buffer.ok()) << buffer.status().ToString();
    return (*buffer)->ToString();
  }

  uint64_t seed_ = 0;
  fs::path dir_;
  std::map<std::string, std::string> contents_;
  std::shared_ptr<CountingIO> counting_ = std::make_shared<CountingIO>();
};

TEST_F(ReadCacheTest, ARangeReadOnceIsNotReadAgain) {
  const std::string path = MakeFile("a.parquet", 5 * kMiB + 123);
  auto io = Cache();
  EXPECT_EQ(Read(*io, path, 100, 1000), contents_[path].substr(100, 1000));
  EXPECT_EQ(counting_->opens, 1);
  EXPECT_EQ(counting_->reads, 1);
  EXPECT_EQ(counting_->bytes, kMiB);  // the block around it
  // Another reader of the same file, another range of the same block: nothing read.
  EXPECT_EQ(Read(*io, path, 5000, 70000), contents_[path].substr(5000, 70000));
  EXPECT_EQ(counting_->opens, 1);
  EXPECT_EQ(counting_->reads, 1);
  // A range over a held block and three missing ones: one read of the three.
  EXPECT_EQ(Read(*io, path, kMiB - 10, 3 * kMiB),
            contents_[path].substr(kMiB - 10, 3 * kMiB));
  EXPECT_EQ(counting_->reads, 2);
  EXPECT_EQ(counting_->bytes, 4 * kMiB);
  // The end of the file: a short block, a read past the end cut there. It is fetched
  // as the file's last MiB (a fetch that small the store's input would keep in
  // memory), the block before it not marked held.
  EXPECT_EQ(Read(*io, path, 5 * kMiB, kMiB), contents_[path].substr(5 * kMiB));
  EXPECT_EQ(counting_->bytes, 5 * kMiB);
  // The whole file: only the block never read before is fetched; then everything is
  // held, and ReadAll reads nothing.
  EXPECT_EQ(Read(*io, path, 0, 6 * kMiB), contents_[path]);
  EXPECT_EQ(counting_->bytes, 6 * kMiB);
  auto all = io->ReadAll(path);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, contents_[path]);
  EXPECT_EQ(counting_->reads, 4);
  // The file is open on the store only while a reader of it misses: once per such
  // reader (4 of the 6 readers above missed), not per read.
  EXPECT_EQ(counting_->opens, 4);
}

TEST_F(ReadCacheTest, OtherFilesAndObjectStoreOnlyPassThrough) {
  const std::string json = MakeFile("v1.metadata.json", 1000);
  auto io = Cache();
  EXPECT_EQ(*io->ReadAll(json), contents_[json]);
  EXPECT_EQ(*io->ReadAll(json), contents_[json]);
  EXPECT_EQ(counting_->reads, 2);  // metadata JSON is not immutable by name: not kept

  // By default only object-store locations are kept: a local Parquet file is read
  // through every time.
  const std::string parquet = MakeFile("b.parquet", 3000);
  ReadCacheOptions options;
  options.dir = dir_ / "cache";
  auto store_only = MakeReadCachingFileIO(counting_, options);
  ASSERT_TRUE(store_only.ok());
  const int before = counting_->reads;
  EXPECT_EQ(Read(**store_only, parquet, 0, 3000), contents_[parquet]);
  EXPECT_EQ(Read(**store_only, parquet, 0, 3000), contents_[parquet]);
  EXPECT_EQ(counting_->reads, before + 2);
}

TEST_F(ReadCacheTest, PastItsBudgetItReadsThrough) {
  const std::string path = MakeFile("c.avro", 4 * kMiB);
  std::vector<int64_t> told;
  ReadCacheOptions options;
  options.dir = dir_ / "cache";
  options.max_bytes = 2 * kMiB;
  options.min_free_bytes = 0;
  options.local_too = true;
  options.on_full = [&](int64_t kept) { told.push_back(kept); };
  auto made = MakeReadCachingFileIO(counting_, options);
  ASSERT_TRUE(made.ok());
  auto io = *made;
  EXPECT_EQ(Read(*io, path, 0, 2 * kMiB), contents_[path].substr(0, 2 * kMiB));
  EXPECT_EQ(counting_->reads, 1);
  // The budget is spent: the next blocks are read through, every time.
  EXPECT_EQ(Read(*io, path, 2 * kMiB + 5, 100),
            contents_[path].substr(2 * kMiB + 5, 100));
  EXPECT_EQ(Read(*io, path, 2 * kMiB + 5, 100),
            contents_[path].substr(2 * kMiB + 5, 100));
  EXPECT_EQ(counting_->reads, 3);
  // What was kept still is.
  EXPECT_EQ(Read(*io, path, 10, 2 * kMiB - 10),
            contents_[path].substr(10, 2 * kMiB - 10));
  EXPECT_EQ(counting_->reads, 3);
  // It told once that it was full, holding the 2 MiB it kept.
  EXPECT_EQ(told, std::vector<int64_t>{2 * kMiB});
}

TEST_F(ReadCacheTest, ADiskShortOfRoomIsLeftAlone) {
  const std::string path = MakeFile("e.parquet", 2 * kMiB);
  // More free space asked for than any disk has: nothing is kept.
  auto io = Cache(int64_t{1} << 30, /*min_free_bytes=*/int64_t{1} << 60);
  EXPECT_EQ(Read(*io, path, 0, 100), contents_[path].substr(0, 100));
  EXPECT_EQ(Read(*io, path, 0, 100), contents_[path].substr(0, 100));
  EXPECT_EQ(counting_->reads, 2);
  EXPECT_EQ(counting_->bytes, 200);
}

TEST_F(ReadCacheTest, RandomReadsFromSeveralThreadsReturnTheFilesBytes) {
  std::vector<std::string> paths;
  for (int i = 0; i < 4; ++i) {
    paths.push_back(MakeFile("f" + std::to_string(i) + ".parquet",
                             static_cast<int64_t>(seed_ % 3 + 1) * kMiB + i * 77777));
  }
  auto io = Cache();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed_ + static_cast<uint64_t>(t));
      for (int i = 0; i < 300; ++i) {
        const std::string& path = paths[rng() % paths.size()];
        const std::string& want = contents_[path];
        const int64_t at = static_cast<int64_t>(rng() % want.size());
        const int64_t n =
            static_cast<int64_t>(rng() % (rng() % 4 == 0 ? 3 * kMiB : 5000));
        auto input = io->OpenInput(path);
        if (!input.ok()) {
          ++wrong;
          continue;
        }
        auto got = (*input)->ReadAt(at, n);
        if (!got.ok() || (*got)->ToString() != want.substr(at, n)) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong, 0);
  // No byte read twice, but for the MiB before each file's last block (fetched with
  // it), and each file opened at most once per reader.
  EXPECT_LE(counting_->opens, 4 * 300);
  // With no reader left, no file is held open on the store (its input may keep MiBs
  // of the file in memory), though the cache itself lives on.
  EXPECT_EQ(counting_->live, 0);
  int64_t total = 0;
  for (const auto& p : paths) total += static_cast<int64_t>(contents_[p].size());
  EXPECT_LE(counting_->bytes, total + static_cast<int64_t>(paths.size()) * kMiB);
}

TEST_F(ReadCacheTest, ItsDirectoryGoesWithIt) {
  const std::string path = MakeFile("d.parquet", 2 * kMiB);
  {
    auto io = Cache();
    EXPECT_EQ(Read(*io, path, 0, 10), contents_[path].substr(0, 10));
    EXPECT_FALSE(fs::is_empty(dir_ / "cache"));
  }
  EXPECT_TRUE(fs::is_empty(dir_ / "cache"));
}

}  // namespace
}  // namespace floe::iceberg

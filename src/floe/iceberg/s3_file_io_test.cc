// The object-store FileIO against a real S3-compatible server: moto's, started by
// each test on a free 127.0.0.1 port (scripts/bootstrap installs it in the project
// virtualenv; FLOE_MOTO_SERVER names another).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <arrow/buffer.h>
#include <arrow/filesystem/s3fs.h>
#include <arrow/io/interfaces.h>
#include <gtest/gtest.h>

#include "floe/iceberg/file_io.h"

namespace floe::iceberg {
namespace {

namespace afs = arrow::fs;

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool Listening(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

class S3FileIOTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* env = std::getenv("FLOE_MOTO_SERVER");
    const std::string exe = env ? env : FLOE_SOURCE_DIR "/.venv/bin/moto_server";
    ASSERT_TRUE(std::filesystem::exists(exe))
        << exe << " is missing: run scripts/bootstrap (it installs moto[server])";
    port_ = FreePort();
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      execl(exe.c_str(), exe.c_str(), "-H", "127.0.0.1", "-p", port.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!Listening(port_)) {
      int status = 0;
      ASSERT_EQ(::waitpid(pid_, &status, WNOHANG), 0) << "moto_server exited";
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "moto_server not up";
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    options_.endpoint = "http://127.0.0.1:" + std::to_string(port_);
    options_.region = "us-east-1";
    options_.path_style = true;
    options_.access_key_id = "test-key";
    options_.secret_access_key = "test-secret";
    // The bucket, made with a client of its own (floe never creates buckets).
    ASSERT_TRUE(afs::EnsureS3Initialized().ok());
    auto admin = afs::S3Options::FromAccessKey("test-key", "test-secret");
    admin.endpoint_override = "127.0.0.1:" + std::to_string(port_);
    admin.scheme = "http";
    admin.region = "us-east-1";
    admin.allow_bucket_creation = true;
    auto fs = afs::S3FileSystem::Make(admin);
    ASSERT_TRUE(fs.ok()) << fs.status().ToString();
    ASSERT_TRUE((*fs)->CreateDir("lake").ok());
    io_ = MakeFileIO(options_);
  }

  void TearDown() override {
    io_.reset();
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    FinalizeObjectStores();
  }

  S3Options options_;
  std::shared_ptr<FileIO> io_;
  int port_ = 0;
  pid_t pid_ = -1;
};

TEST_F(S3FileIOTest, WritesReadsListsAndDeletesObjects) {
  // Larger than a multipart upload's part (Arrow: 10 MiB): several parts.
  std::string big(23 * 1024 * 1024 + 17, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 251);
  auto out = io_->OpenOutput("s3://lake/t/data/big.parquet");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (size_t at = 0; at < big.size(); at += 3 * 1024 * 1024 + 7) {
    const size_t n = std::min<size_t>(3 * 1024 * 1024 + 7, big.size() - at);
    ASSERT_TRUE((*out)->Write(big.data() + at, static_cast<int64_t>(n)).ok());
  }
  // Not there until the upload completes.
  EXPECT_FALSE(*io_->Exists("s3://lake/t/data/big.parquet"));
  ASSERT_TRUE((*out)->Close().ok());
  ASSERT_TRUE(io_->Sync("s3://lake/t/data/big.parquet").ok());
  EXPECT_TRUE(*io_->Exists("s3://lake/t/data/big.parquet"));
  auto read = io_->ReadAll("s3://lake/t/data/big.parquet");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == big);
  // The locations Java engines write reach the same object.
  auto input = io_->OpenInput("s3a://lake/t/data/big.parquet");
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  auto tail = (*input)->ReadAt(static_cast<int64_t>(big.size()) - 5, 5);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ((*tail)->ToString(), big.substr(big.size() - 5));
  // Small reads come from 1 MiB blocks of the object: reads within a block, across
  // block boundaries, through Read()'s own position and past the end all give the
  // object's bytes.
  const int64_t mib = int64_t{1} << 20;
  const int64_t size = static_cast<int64_t>(big.size());
  for (auto [at, n] : std::vector<std::pair<int64_t, int64_t>>{{0, 4},
                                                               {mib - 3, 7},
                                                               {5 * mib - 100, 200},
                                                               {17, mib - 1},
                                                               {2 * mib - 1, mib - 1},
                                                               {size - 10, 10},
                                                               {size - 4, 100},
                                                               {mib + 5, 1000},
                                                               {3, 3}}) {
    auto part = (*input)->ReadAt(at, n);
    ASSERT_TRUE(part.ok()) << at << " " << part.status().ToString();
    EXPECT_EQ((*part)->ToString(), big.substr(at, n)) << at << " " << n;
  }
  ASSERT_TRUE((*input)->Seek(mib - 2).ok());
  std::string sequential(6, '\0');
  auto got = (*input)->Read(6, sequential.data());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, 6);
  EXPECT_EQ(sequential, big.substr(mib - 2, 6));
  EXPECT_EQ(*(*input)->Tell(), mib + 4);

  ASSERT_TRUE(io_->WriteAtomically("s3://lake/t/metadata/v1.json", "{}", true).ok());
  ASSERT_TRUE(io_->WriteAtomically("s3://lake/t2/x.json", "other table", false).ok());
  auto listed = io_->List("s3://lake/t");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 2u);  // not t2/x.json: a prefix is a directory
  std::map<std::string, int64_t> sizes;
  for (const FileEntry& e : *listed) {
    sizes[e.location] = e.size;
    EXPECT_GT(e.modified_ms, 1'700'000'000'000) << e.location;
  }
  EXPECT_EQ(sizes["s3://lake/t/data/big.parquet"], static_cast<int64_t>(big.size()));
  EXPECT_EQ(sizes["s3://lake/t/metadata/v1.json"], 2);
  EXPECT_TRUE(io_->List("s3://lake/t/")->size() == 2u);
  EXPECT_TRUE(io_->List("s3://lake/absent")->empty());

  ASSERT_TRUE(io_->Delete("s3://lake/t/data/big.parquet").ok());
  EXPECT_FALSE(*io_->Exists("s3://lake/t/data/big.parquet"));
  EXPECT_TRUE(io_->Delete("s3://lake/t/data/big.parquet").ok());  // already gone
  EXPECT_FALSE(io_->OpenInput("s3://lake/t/data/big.parquet").ok());
  EXPECT_EQ(io_->List("s3://lake/t")->size(), 1u);
}

TEST_F(S3FileIOTest, ListingGoesPastOnePageOfResults) {
  // S3 lists at most 1,000 keys a request: more than two pages' worth, and a
  // sibling prefix that must not be listed.
  constexpr int kObjects = 2100;
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (int i = w; i < kObjects; i += 4) {
        ASSERT_TRUE(io_->WriteAtomically("s3://lake/many/d" + std::to_string(i % 7) +
                                             "/f" + std::to_string(i),
                                         std::to_string(i), false)
                        .ok());
      }
    });
  }
  for (auto& t : writers) t.join();
  ASSERT_TRUE(io_->WriteAtomically("s3://lake/many-not/x", "x", false).ok());
  auto listed = io_->List("s3://lake/many");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  std::set<std::string> names;
  for (const FileEntry& e : *listed) names.insert(e.location);
  EXPECT_EQ(names.size(), static_cast<size_t>(kObjects));
  EXPECT_TRUE(names.contains("s3://lake/many/d5/f2000"));
  EXPECT_FALSE(names.contains("s3://lake/many-not/x"));
}

TEST_F(S3FileIOTest, AWriterDroppedBeforeCloseLeavesNoObject) {
  for (const int64_t size : {int64_t{100}, int64_t{12} << 20}) {
    const std::string location = "s3://lake/drop/" + std::to_string(size);
    {
      auto out = io_->OpenOutput(location);
      ASSERT_TRUE(out.ok());
      const std::string bytes(static_cast<size_t>(size), 'x');
      ASSERT_TRUE((*out)->Write(bytes.data(), size).ok());
    }  // an error path: the stream is dropped unclosed
    EXPECT_FALSE(*io_->Exists(location)) << size;
  }
  EXPECT_TRUE(io_->List("s3://lake/drop")->empty());
}

TEST_F(S3FileIOTest, AnExclusiveWriteRefusesAnExistingObject) {
  ASSERT_TRUE(io_->WriteAtomically("s3://lake/m/00001.json", "first", true).ok());
  auto again = io_->WriteAtomically("s3://lake/m/00001.json", "second", true);
  EXPECT_TRUE(again.IsAlreadyExists()) << again.ToString();
  EXPECT_EQ(*io_->ReadAll("s3://lake/m/00001.json"), "first");
  ASSERT_TRUE(io_->WriteAtomically("s3://lake/m/00001.json", "third", false).ok());
  EXPECT_EQ(*io_->ReadAll("s3://lake/m/00001.json"), "third");
}

// What a FileIO wrote exclusively (manifests, manifest lists) it reads back without
// a request: shown by removing the object behind its back through another FileIO.
// Other writes, and what it deleted itself, are read from the store.
TEST_F(S3FileIOTest, SmallFilesItWroteExclusivelyAreReadBackFromMemory) {
  auto other = MakeFileIO(options_);
  ASSERT_TRUE(io_->WriteAtomically("s3://lake/m/list.avro", "manifest list", true).ok());
  ASSERT_TRUE(io_->WriteAtomically("s3://lake/m/plain.avro", "plain", false).ok());
  ASSERT_TRUE(other->Delete("s3://lake/m/list.avro").ok());
  ASSERT_TRUE(other->Delete("s3://lake/m/plain.avro").ok());
  EXPECT_EQ(*io_->ReadAll("s3://lake/m/list.avro"), "manifest list");
  auto input = io_->OpenInput("s3://lake/m/list.avro");
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  EXPECT_EQ((*input)->ReadAt(9, 4).ValueOrDie()->ToString(), "list");
  EXPECT_FALSE(io_->ReadAll("s3://lake/m/plain.avro").ok());  // not kept: gone
  // Deleted by this FileIO: forgotten.
  ASSERT_TRUE(io_->WriteAtomically("s3://lake/m/gone.avro", "gone", true).ok());
  ASSERT_TRUE(io_->Delete("s3://lake/m/gone.avro").ok());
  EXPECT_FALSE(io_->ReadAll("s3://lake/m/gone.avro").ok());
  // At most a few MiB are kept: the oldest go first.
  const std::string mib(1 << 20, 'x');
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(
        io_->WriteAtomically("s3://lake/m/big" + std::to_string(i), mib, true).ok());
    ASSERT_TRUE(other->Delete("s3://lake/m/big" + std::to_string(i)).ok());
  }
  EXPECT_FALSE(io_->ReadAll("s3://lake/m/big0").ok());
  EXPECT_TRUE(io_->ReadAll("s3://lake/m/big5").ok());
}

TEST_F(S3FileIOTest, LocalLocationsStayOnDiskAndBadLocationsAreRefused) {
  const char* base = std::getenv("FLOE_TEST_TMPDIR");
  const std::string dir = std::string(base ? base : "/tmp") + "/s3_file_io_test_local_" +
                          std::to_string(port_);
  ASSERT_TRUE(io_->WriteAtomically("file://" + dir + "/a.json", "local", true).ok());
  EXPECT_EQ(*io_->ReadAll(dir + "/a.json"), "local");
  EXPECT_TRUE(io_->List("s3://lake")->empty());
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(io_->Exists("s3:///no-bucket").status().IsInvalid());
  EXPECT_FALSE(IsObjectStoreLocation("file:///s3://x"));
  EXPECT_TRUE(IsObjectStoreLocation("s3n://b/k"));
}

TEST_F(S3FileIOTest, AServerThatIsGoneFailsTheCallInsteadOfHanging) {
  S3Options gone = options_;
  gone.endpoint = "http://127.0.0.1:" + std::to_string(FreePort());
  gone.max_attempts = 2;
  gone.connect_timeout_s = 1;
  auto io = MakeFileIO(gone);
  auto st = io->WriteAtomically("s3://lake/x.json", "{}", false);
  EXPECT_FALSE(st.ok());
  EXPECT_FALSE(io->Exists("s3://lake/x.json").ok());
  // The secret is in no error message.
  EXPECT_EQ(st.ToString().find("test-secret"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace floe::iceberg

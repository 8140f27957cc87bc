#include "floe/iceberg/file_io.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace floe::iceberg {
namespace {

namespace fs = std::filesystem;

class LocalFileIOTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("FLOE_TEST_TMPDIR");
    dir_ = fs::path(base ? base : fs::temp_directory_path().string()) /
           ("file_io_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Uri(const std::string& rel) const {
    return "file://" + (dir_ / rel).string();
  }

  fs::path dir_;
  std::shared_ptr<FileIO> io_ = MakeLocalFileIO();
};

TEST(LocalPath, AcceptsTheFileUriFormsJavaAndPythonWrite) {
  EXPECT_EQ(*LocalPath("file:///w/t/data/a.parquet"), "/w/t/data/a.parquet");
  EXPECT_EQ(*LocalPath("file:/w/t/a.parquet"), "/w/t/a.parquet");
  EXPECT_EQ(*LocalPath("file://localhost/w/a"), "/w/a");
  EXPECT_EQ(*LocalPath("/w/a"), "/w/a");
  EXPECT_TRUE(LocalPath("s3://bucket/key").status().IsInvalid());
  EXPECT_TRUE(LocalPath("relative/path").status().IsInvalid());
  EXPECT_TRUE(LocalPath("file://relative").status().IsInvalid());
}

TEST_F(LocalFileIOTest, AtomicWriteCreatesParentsAndLeavesNoTemporaryFile) {
  ASSERT_TRUE(io_->WriteAtomically(Uri("t/metadata/v1.json"), "{}", true).ok());
  EXPECT_EQ(*io_->ReadAll(Uri("t/metadata/v1.json")), "{}");
  auto files = io_->List(Uri("t"));
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), 1u);
  EXPECT_EQ((*files)[0].location, Uri("t/metadata/v1.json"));
  EXPECT_EQ((*files)[0].size, 2);
  EXPECT_GT((*files)[0].modified_ms, 0);
}

TEST_F(LocalFileIOTest, ExclusiveWriteNeverReplacesAnExistingFile) {
  ASSERT_TRUE(io_->WriteAtomically(Uri("m.json"), "first", true).ok());
  auto st = io_->WriteAtomically(Uri("m.json"), "second", true);
  EXPECT_TRUE(st.IsAlreadyExists()) << st.ToString();
  EXPECT_EQ(*io_->ReadAll(Uri("m.json")), "first");
  EXPECT_EQ(io_->List(Uri(""))->size(), 1u);  // the temporary is gone too
  ASSERT_TRUE(io_->WriteAtomically(Uri("m.json"), "second", false).ok());
  EXPECT_EQ(*io_->ReadAll(Uri("m.json")), "second");
}

TEST_F(LocalFileIOTest, OutputStreamsSyncAndDeleteIsIdempotent) {
  auto out = io_->OpenOutput(Uri("data/deep/x.bin"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_TRUE((*out)->Write("abc", 3).ok());
  ASSERT_TRUE((*out)->Close().ok());
  ASSERT_TRUE(io_->Sync(Uri("data/deep/x.bin")).ok());
  EXPECT_TRUE(*io_->Exists(Uri("data/deep/x.bin")));
  ASSERT_TRUE(io_->Delete(Uri("data/deep/x.bin")).ok());
  EXPECT_FALSE(*io_->Exists(Uri("data/deep/x.bin")));
  EXPECT_TRUE(io_->Delete(Uri("data/deep/x.bin")).ok());
  EXPECT_TRUE(io_->List(Uri("nothing-here"))->empty());
  EXPECT_FALSE(io_->OpenInput(Uri("data/deep/x.bin")).ok());
}

}  // namespace
}  // namespace floe::iceberg

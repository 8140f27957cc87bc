#include "floe/iceberg/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <system_error>

#include <arrow/buffer.h>
#include <arrow/io/file.h>

namespace floe::iceberg {
namespace {

namespace fs = std::filesystem;

arrow::Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  return arrow::Status::IOError(what, " '", path, "': ", std::strerror(err));
}

arrow::Status FsyncPath(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open for fsync", path, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus("fsync failed for", path, err);
  return arrow::Status::OK();
}

std::string TempSibling(const fs::path& target) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char suffix[17];
  std::snprintf(suffix, sizeof(suffix), "%016llx",
                static_cast<unsigned long long>(rng()));
  return (target.parent_path() / ("." + target.filename().string() + ".tmp-" + suffix))
      .string();
}

arrow::Status WriteWhole(const std::string& path, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("cannot create", path, errno);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoStatus("cannot write", path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus("fsync failed for", path, err);
  }
  if (::close(fd) != 0) return ErrnoStatus("cannot close", path, errno);
  return arrow::Status::OK();
}

class LocalFileIO : public FileIO {
 public:
  arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> OpenInput(
      const std::string& location) override {
    ARROW_ASSIGN_OR_RAISE(std::string path, LocalPath(location));
    return arrow::io::ReadableFile::Open(path);
  }

  arrow::Result<std::shared_ptr<arrow::io::OutputStream>> OpenOutput(
      const std::string& location) override {
    ARROW_ASSIGN_OR_RAISE(std::string path, LocalPath(location));
    ARROW_RETURN_NOT_OK(MakeParents(path));
    return arrow::io::FileOutputStream::Open(path);
  }

  arrow::Status WriteAtomically(const std::string& location, std::string_view data,
                                bool exclusive) override {
    ARROW_ASSIGN_OR_RAISE(std::string path, LocalPath(location));
    ARROW_RETURN_NOT_OK(MakeParents(path));
    const std::string tmp = TempSibling(path);
    ARROW_RETURN_NOT_OK(WriteWhole(tmp, data));
    if (exclusive) {
      // link(2) refuses to replace an existing name; rename(2) would not.
      if (::link(tmp.c_str(), path.c_str()) != 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        if (err == EEXIST) {
          return arrow::Status::AlreadyExists("file '", location, "' already exists");
        }
        return ErrnoStatus("cannot create", path, err);
      }
      ::unlink(tmp.c_str());
    } else if (::rename(tmp.c_str(), path.c_str()) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      return ErrnoStatus("cannot rename into", path, err);
    }
    return FsyncPath(fs::path(path).parent_path().string(), /*directory=*/true);
  }

  arrow::Status Sync(const std::string& location) override {
    ARROW_ASSIGN_OR_RAISE(std::string path, LocalPath(location));
    ARROW_RETURN_NOT_OK(FsyncPath(path, /*directory=*/false));
    return FsyncPath(fs::path(path).parent_path().string(), /*directory=*/true);
  }

  arrow::Result<bool> Exists(const std::string& location) override {
    ARROW_ASSIGN_OR_RAISE(std::string path, LocalPath(location));
    std::error_code ec;
    bool exists = fs::exists(path, ec);
    if (ec) return arrow::Status::IOError("cannot stat '", path, "': ", ec.message());
    return exists;
  }

  arrow::Status Delete(const std::string& location) override {
    ARROW_ASSIGN_OR_RAISE(std::string path, LocalPath(location));
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return ErrnoStatus("cannot delete", path, errno);
    }
    return arrow::Status::OK();
  }

  arrow::Result<std::vector<FileEntry>> List(const std::string& prefix) override {
    ARROW_ASSIGN_OR_RAISE(std::string path, LocalPath(prefix));
    std::vector<FileEntry> out;
    std::error_code ec;
    if (!fs::exists(path, ec)) return out;
    for (auto it = fs::recursive_directory_iterator(path, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      FileEntry entry;
      entry.location = "file://" + it->path().string();
      entry.size = static_cast<int64_t>(it->file_size(ec));
      auto mtime = it->last_write_time(ec);
      auto sys = std::chrono::file_clock::to_sys(mtime);
      entry.modified_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(sys.time_since_epoch())
              .count();
      out.push_back(std::move(entry));
    }
    if (ec) return arrow::Status::IOError("cannot list '", path, "': ", ec.message());
    return out;
  }

 private:
  static arrow::Status MakeParents(const std::string& path) {
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    if (ec) {
      return arrow::Status::IOError("cannot create directory for '", path,
                                    "': ", ec.message());
    }
    return arrow::Status::OK();
  }
};

}  // namespace

arrow::Result<std::string> FileIO::ReadAll(const std::string& location) {
  ARROW_ASSIGN_OR_RAISE(auto file, OpenInput(location));
  ARROW_ASSIGN_OR_RAISE(int64_t size, file->GetSize());
  ARROW_ASSIGN_OR_RAISE(auto buffer, file->ReadAt(0, size));
  ARROW_RETURN_NOT_OK(file->Close());
  return buffer->ToString();
}

std::shared_ptr<FileIO> MakeLocalFileIO() { return std::make_shared<LocalFileIO>(); }

arrow::Result<std::string> LocalPath(std::string_view location) {
  std::string_view path = location;
  if (path.starts_with("file://")) {
    path.remove_prefix(7);
    // file://localhost/abs is the same as file:///abs
    if (path.starts_with("localhost/")) path.remove_prefix(9);
  } else if (path.starts_with("file:")) {
    path.remove_prefix(5);
  } else if (auto colon = path.find(':');
             colon != std::string_view::npos && path.find('/') > colon) {
    return arrow::Status::Invalid("location '", location,
                                  "' is not on the local filesystem; only file: "
                                  "locations are supported so far");
  }
  if (!path.starts_with("/")) {
    return arrow::Status::Invalid("location '", location,
                                  "' is not absolute; use file:///absolute/path");
  }
  return std::string(path);
}

}  // namespace floe::iceberg

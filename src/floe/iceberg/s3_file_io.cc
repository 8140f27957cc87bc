// FileIO on an S3-compatible object store, through Arrow's S3 filesystem (the AWS
// SDK underneath), and the FileIO that picks local disk or the object store by a
// location's scheme.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <arrow/buffer.h>
#include <arrow/filesystem/s3fs.h>
#include <arrow/io/interfaces.h>
#include <arrow/io/memory.h>

#include "floe/iceberg/file_io.h"
#include "floe/iceberg/positioned_input.h"
#include "floe/iceberg/vended_credentials.h"

namespace floe::iceberg {
namespace {

namespace afs = arrow::fs;

constexpr std::string_view kSchemes[] = {"s3://", "s3a://", "s3n://"};

// `bucket/key` of an object-store location.
arrow::Result<std::string> ObjectPath(std::string_view location) {
  for (std::string_view scheme : kSchemes) {
    if (!location.starts_with(scheme)) continue;
    std::string_view path = location.substr(scheme.size());
    if (path.empty() || path.front() == '/') {
      return arrow::Status::Invalid("location '", location, "' names no bucket");
    }
    return std::string(path);
  }
  return arrow::Status::Invalid("location '", location, "' is not an s3:// location");
}

// Set by StopObjectStoreRetries: once it reads true, failed requests are not tried
// again (a stop asked for is heard within one request, not after every retry).
std::atomic<const std::atomic<bool>*> g_stop_retries{nullptr};

bool Stopping() {
  const std::atomic<bool>* stop = g_stop_retries.load();
  return stop != nullptr && stop->load();
}

// The SDK's standard retries, until a stop is asked for.
class StoppableRetryStrategy : public afs::S3RetryStrategy {
 public:
  explicit StoppableRetryStrategy(std::shared_ptr<afs::S3RetryStrategy> inner)
      : inner_(std::move(inner)) {}
  bool ShouldRetry(const AWSErrorDetail& error, int64_t attempted_retries) override {
    return !Stopping() && inner_->ShouldRetry(error, attempted_retries);
  }
  int64_t CalculateDelayBeforeNextRetry(const AWSErrorDetail& error,
                                        int64_t attempted_retries) override {
    return inner_->CalculateDelayBeforeNextRetry(error, attempted_retries);
  }

 private:
  std::shared_ptr<afs::S3RetryStrategy> inner_;
};

arrow::Result<afs::S3Options> ArrowOptions(const S3Options& s3) {
  afs::S3Options out;
  if (!s3.access_key_id.empty() || !s3.secret_access_key.empty()) {
    out = afs::S3Options::FromAccessKey(s3.access_key_id, s3.secret_access_key,
                                        s3.session_token);
  } else {
    out = afs::S3Options::Defaults();
  }
  if (!s3.endpoint.empty()) {
    std::string_view endpoint = s3.endpoint;
    if (endpoint.starts_with("http://")) {
      out.scheme = "http";
      endpoint.remove_prefix(7);
    } else if (endpoint.starts_with("https://")) {
      out.scheme = "https";
      endpoint.remove_prefix(8);
    }
    while (endpoint.ends_with('/')) endpoint.remove_suffix(1);
    out.endpoint_override = std::string(endpoint);
    // Arrow addresses the bucket in the path whenever an endpoint is set.
    out.force_virtual_addressing = !s3.path_style;
  }
  if (!s3.region.empty()) out.region = s3.region;
  // A small object (metadata, a manifest) goes up as one PUT when it is closed; a
  // multipart upload starts only once a part's worth has been written.
  out.allow_delayed_open = true;
  if (s3.connect_timeout_s > 0) out.connect_timeout = s3.connect_timeout_s;
  if (s3.request_timeout_s > 0) out.request_timeout = s3.request_timeout_s;
  out.retry_strategy = std::make_shared<StoppableRetryStrategy>(
      afs::S3RetryStrategy::GetAwsStandardRetryStrategy(std::max(1, s3.max_attempts)));
  return out;
}

// Calls `read` until it succeeds, an error other than an I/O error, or `attempts`
// tries, backing off between them. A ranged GET answered `503 SlowDown` can reach
// Arrow as a failure the SDK does not retry (the error body overflows the buffer
// of the range); reads are idempotent, so they are retried here.
template <typename T>
arrow::Result<T> RetryRead(int attempts, const std::function<arrow::Result<T>()>& read) {
  std::chrono::milliseconds pause{50};
  for (int attempt = 1;; ++attempt) {
    arrow::Result<T> result = read();
    if (result.ok() || !result.status().IsIOError() || attempt >= attempts ||
        Stopping()) {
      return result;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(2000));
  }
}

// An object opened for reading, its reads retried (RetryRead). Positioned reads go
// to ReadAt; Read() keeps its own position (PositionedInput).
//
// Small reads are served from whole blocks of the object (kBlockBytes, aligned, the
// last few kept): a Parquet reader reads a footer's length, then the footer, then per
// row group a bloom filter's header and bitset and a column chunk, each a read of its
// own. On disk that is a pread each; on an object store each would be a GET costing a
// round trip and a request's fee. Reads of a block or more go straight to the store.
class RetryingInput : public PositionedInput {
 public:
  using PositionedInput::ReadAt;

  static constexpr int64_t kBlockBytes = int64_t{1} << 20;
  static constexpr size_t kBlocksKept = 4;

  RetryingInput(std::shared_ptr<arrow::io::RandomAccessFile> inner, int attempts)
      : inner_(std::move(inner)), attempts_(attempts) {}

  arrow::Status Close() override { return inner_->Close(); }
  bool closed() const override { return inner_->closed(); }
  arrow::Result<int64_t> GetSize() override { return inner_->GetSize(); }

  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, void* out) override {
    if (nbytes >= kBlockBytes) {
      return RetryRead<int64_t>(attempts_,
                                [&] { return inner_->ReadAt(position, nbytes, out); });
    }
    ARROW_ASSIGN_OR_RAISE(const int64_t size, inner_->GetSize());
    nbytes = std::max<int64_t>(0, std::min(nbytes, size - position));
    std::lock_guard lock(mutex_);
    int64_t done = 0;
    while (done < nbytes) {
      const int64_t at = position + done;
      ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> block,
                            Block(at / kBlockBytes));
      const int64_t offset = at % kBlockBytes;
      const int64_t n = std::min(nbytes - done, block->size() - offset);
      if (n <= 0) break;
      std::memcpy(static_cast<uint8_t*>(out) + done, block->data() + offset,
                  static_cast<size_t>(n));
      done += n;
    }
    return done;
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position,
                                                       int64_t nbytes) override {
    if (nbytes >= kBlockBytes) {
      return RetryRead<std::shared_ptr<arrow::Buffer>>(
          attempts_, [&] { return inner_->ReadAt(position, nbytes); });
    }
    return PositionedInput::ReadAt(position, nbytes);
  }

 private:
  // Block `index` of the object, fetched when not kept. REQUIRES: mutex_ held.
  arrow::Result<std::shared_ptr<arrow::Buffer>> Block(int64_t index) {
    for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
      if (it->first == index) {
        auto hit = *it;
        blocks_.erase(it);
        blocks_.insert(blocks_.begin(), hit);  // most recently used first
        return hit.second;
      }
    }
    ARROW_ASSIGN_OR_RAISE(const int64_t size, inner_->GetSize());
    const int64_t start = index * kBlockBytes;
    const int64_t n = std::min(kBlockBytes, size - start);
    ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> block,
                          RetryRead<std::shared_ptr<arrow::Buffer>>(attempts_, [&] {
                            return inner_->ReadAt(start, std::max<int64_t>(0, n));
                          }));
    blocks_.insert(blocks_.begin(), {index, block});
    if (blocks_.size() > kBlocksKept) blocks_.pop_back();
    return block;
  }

  std::shared_ptr<arrow::io::RandomAccessFile> inner_;
  const int attempts_;
  std::mutex mutex_;
  std::vector<std::pair<int64_t, std::shared_ptr<arrow::Buffer>>> blocks_;
};

// An object being written. Dropped before Close() (a writer's error path), its
// upload is aborted: no parts left behind, and no half-written object completed by
// Arrow's destructor (which would also print its error past floe's log).
class AbortingOutput : public arrow::io::OutputStream {
 public:
  explicit AbortingOutput(std::shared_ptr<arrow::io::OutputStream> inner)
      : inner_(std::move(inner)) {}
  ~AbortingOutput() override {
    if (inner_->closed()) return;
    // Parts still uploading finish first: aborting the upload under them stalls.
    (void)inner_->Flush();
    (void)inner_->Abort();
  }

  arrow::Status Close() override { return inner_->Close(); }
  arrow::Status Abort() override { return inner_->Abort(); }
  bool closed() const override { return inner_->closed(); }
  arrow::Result<int64_t> Tell() const override { return inner_->Tell(); }
  arrow::Status Write(const void* data, int64_t nbytes) override {
    return inner_->Write(data, nbytes);
  }
  arrow::Status Write(const std::shared_ptr<arrow::Buffer>& data) override {
    return inner_->Write(data);
  }
  arrow::Status Flush() override { return inner_->Flush(); }

 private:
  std::shared_ptr<arrow::io::OutputStream> inner_;
};

class S3FileIO : public FileIO {
 public:
  S3FileIO(std::shared_ptr<afs::S3FileSystem> fs, int attempts)
      : fs_(std::move(fs)), attempts_(std::max(1, attempts)) {}

  arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> OpenInput(
      const std::string& location) override {
    ARROW_ASSIGN_OR_RAISE(std::string path, ObjectPath(location));
    using File = std::shared_ptr<arrow::io::RandomAccessFile>;
    ARROW_ASSIGN_OR_RAISE(File file,
                          RetryRead<File>(attempts_, [&]() -> arrow::Result<File> {
                            return fs_->OpenInputFile(path);
                          }));
    return std::make_shared<RetryingInput>(std::move(file), attempts_);
  }

  arrow::Result<std::shared_ptr<arrow::io::OutputStream>> OpenOutput(
      const std::string& location) override {
    ARROW_ASSIGN_OR_RAISE(std::string path, ObjectPath(location));
    // The object appears only when Close() completes its (multipart) upload.
    ARROW_ASSIGN_OR_RAISE(auto out, fs_->OpenOutputStream(path));
    return std::make_shared<AbortingOutput>(std::move(out));
  }

  arrow::Status WriteAtomically(const std::string& location, std::string_view data,
                                bool exclusive) override {
    if (exclusive) {
      ARROW_ASSIGN_OR_RAISE(bool exists, Exists(location));
      if (exists) {
        return arrow::Status::AlreadyExists("file '", location, "' already exists");
      }
    }
    ARROW_ASSIGN_OR_RAISE(auto out, OpenOutput(location));
    ARROW_RETURN_NOT_OK(out->Write(data.data(), static_cast<int64_t>(data.size())));
    return out->Close();
  }

  arrow::Status Sync(const std::string& location) override {
    ARROW_RETURN_NOT_OK(ObjectPath(location).status());
    return arrow::Status::OK();
  }

  arrow::Result<bool> Exists(const std::string& location) override {
    ARROW_ASSIGN_OR_RAISE(std::string path, ObjectPath(location));
    ARROW_ASSIGN_OR_RAISE(afs::FileInfo info, fs_->GetFileInfo(path));
    return info.type() == afs::FileType::File;
  }

  arrow::Status Delete(const std::string& location) override {
    ARROW_ASSIGN_OR_RAISE(std::string path, ObjectPath(location));
    ARROW_ASSIGN_OR_RAISE(afs::FileInfo info, fs_->GetFileInfo(path));
    if (info.type() != afs::FileType::File) return arrow::Status::OK();
    return fs_->DeleteFile(path);
  }

  arrow::Result<std::vector<FileEntry>> List(const std::string& prefix) override {
    ARROW_ASSIGN_OR_RAISE(std::string path, ObjectPath(prefix));
    while (path.ends_with('/')) path.pop_back();
    afs::FileSelector selector;
    selector.base_dir = path;
    selector.recursive = true;
    selector.allow_not_found = true;
    ARROW_ASSIGN_OR_RAISE(auto infos, fs_->GetFileInfo(selector));
    std::vector<FileEntry> out;
    out.reserve(infos.size());
    for (const afs::FileInfo& info : infos) {
      if (info.type() != afs::FileType::File) continue;
      FileEntry entry;
      entry.location = "s3://" + info.path();
      entry.size = info.size();
      entry.modified_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              info.mtime().time_since_epoch())
                              .count();
      out.push_back(std::move(entry));
    }
    return out;
  }

 private:
  std::shared_ptr<afs::S3FileSystem> fs_;
  const int attempts_;
};

// Local disk for local locations, the object store (made at its first use) for the
// others.
class ResolvingFileIO : public FileIO {
 public:
  explicit ResolvingFileIO(S3Options s3) : s3_(std::move(s3)) {}

  arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> OpenInput(
      const std::string& location) override {
    if (auto kept = Written(location)) {
      return std::make_shared<arrow::io::BufferReader>(arrow::Buffer::FromString(*kept));
    }
    ARROW_ASSIGN_OR_RAISE(FileIO * io, For(location));
    return io->OpenInput(location);
  }
  arrow::Result<std::string> ReadAll(const std::string& location) override {
    if (auto kept = Written(location)) return *kept;
    ARROW_ASSIGN_OR_RAISE(FileIO * io, For(location));
    return io->ReadAll(location);
  }
  arrow::Result<std::shared_ptr<arrow::io::OutputStream>> OpenOutput(
      const std::string& location) override {
    ARROW_ASSIGN_OR_RAISE(FileIO * io, For(location));
    Forget(location);
    return io->OpenOutput(location);
  }
  arrow::Status WriteAtomically(const std::string& location, std::string_view data,
                                bool exclusive) override {
    ARROW_ASSIGN_OR_RAISE(FileIO * io, For(location));
    Forget(location);  // replaced (or not there) now
    ARROW_RETURN_NOT_OK(io->WriteAtomically(location, data, exclusive));
    Keep(location, data, exclusive);
    return arrow::Status::OK();
  }
  arrow::Status Sync(const std::string& location) override {
    ARROW_ASSIGN_OR_RAISE(FileIO * io, For(location));
    return io->Sync(location);
  }
  arrow::Result<bool> Exists(const std::string& location) override {
    ARROW_ASSIGN_OR_RAISE(FileIO * io, For(location));
    return io->Exists(location);
  }
  arrow::Status Delete(const std::string& location) override {
    Forget(location);
    ARROW_ASSIGN_OR_RAISE(FileIO * io, For(location));
    return io->Delete(location);
  }
  arrow::Result<std::vector<FileEntry>> List(const std::string& prefix) override {
    ARROW_ASSIGN_OR_RAISE(FileIO * io, For(prefix));
    return io->List(prefix);
  }

 private:
  arrow::Result<FileIO*> For(std::string_view location) {
    if (!IsObjectStoreLocation(location)) return local_.get();
    // Credentials a catalog vended for the location's table win over the settings.
    std::optional<StorageCredential> vended = VendedCredentials::Global().For(location);
    std::lock_guard lock(mu_);
    if (vended) {
      const std::string key = vended->access_key_id + '\n' + vended->secret_access_key +
                              '\n' + vended->session_token;
      auto& io = vended_io_[key];
      if (io == nullptr) {
        S3Options s3 = s3_;
        s3.access_key_id = vended->access_key_id;
        s3.secret_access_key = vended->secret_access_key;
        s3.session_token = vended->session_token;
        ARROW_ASSIGN_OR_RAISE(io, MakeS3FileIO(s3));
      }
      return io.get();
    }
    if (s3_io_ == nullptr) {
      ARROW_ASSIGN_OR_RAISE(s3_io_, MakeS3FileIO(s3_));
    }
    return s3_io_.get();
  }

  // The small files this FileIO wrote exclusively to the object store (manifests,
  // manifest lists, metadata: immutable, named once), kept to be read back without a
  // request: each commit reads the manifest list the one before it wrote.
  static constexpr int64_t kKeptBytes = 4 << 20;
  static constexpr size_t kKeptFileBytes = 1 << 20;

  void Keep(const std::string& location, std::string_view data, bool exclusive) {
    if (!exclusive || data.size() > kKeptFileBytes || !IsObjectStoreLocation(location)) {
      return;
    }
    std::lock_guard lock(written_mu_);
    if (written_.contains(location)) return;
    written_.emplace(location, std::string(data));
    written_order_.push_back(location);
    written_bytes_ += static_cast<int64_t>(data.size());
    while (written_bytes_ > kKeptBytes && !written_order_.empty()) {
      if (auto it = written_.find(written_order_.front()); it != written_.end()) {
        written_bytes_ -= static_cast<int64_t>(it->second.size());
        written_.erase(it);
      }
      written_order_.pop_front();
    }
  }

  void Forget(const std::string& location) {
    std::lock_guard lock(written_mu_);
    if (auto it = written_.find(location); it != written_.end()) {
      written_bytes_ -= static_cast<int64_t>(it->second.size());
      written_.erase(it);
    }
  }

  std::optional<std::string> Written(const std::string& location) {
    std::lock_guard lock(written_mu_);
    auto it = written_.find(location);
    if (it == written_.end()) return std::nullopt;
    return it->second;
  }

  static arrow::Result<std::shared_ptr<FileIO>> MakeS3FileIO(const S3Options& s3) {
    ARROW_RETURN_NOT_OK(afs::EnsureS3Initialized());
    ARROW_ASSIGN_OR_RAISE(afs::S3Options options, ArrowOptions(s3));
    ARROW_ASSIGN_OR_RAISE(auto fs, afs::S3FileSystem::Make(options));
    return std::make_shared<S3FileIO>(std::move(fs), s3.max_attempts);
  }

  const S3Options s3_;
  const std::shared_ptr<FileIO> local_ = MakeLocalFileIO();
  std::mutex mu_;
  std::shared_ptr<FileIO> s3_io_;
  // By credential (expired ones stay until the FileIO goes: a few per long run).
  std::map<std::string, std::shared_ptr<FileIO>> vended_io_;
  std::mutex written_mu_;
  std::map<std::string, std::string> written_;
  std::deque<std::string> written_order_;  // oldest first
  int64_t written_bytes_ = 0;
};

}  // namespace

bool IsObjectStoreLocation(std::string_view location) {
  for (std::string_view scheme : kSchemes) {
    if (location.starts_with(scheme)) return true;
  }
  return false;
}

std::shared_ptr<FileIO> MakeFileIO(const S3Options& s3) {
  return std::make_shared<ResolvingFileIO>(s3);
}

arrow::Status CheckObjectStore(const std::string& location, const S3Options& s3) {
  if (!IsObjectStoreLocation(location)) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(std::string path, ObjectPath(location));
  const std::string bucket = path.substr(0, path.find('/'));
  ARROW_RETURN_NOT_OK(afs::EnsureS3Initialized());
  ARROW_ASSIGN_OR_RAISE(afs::S3Options options, ArrowOptions(s3));
  ARROW_ASSIGN_OR_RAISE(auto fs, afs::S3FileSystem::Make(options));
  const std::string where =
      s3.endpoint.empty() ? std::string("AWS S3") : "the S3 server at " + s3.endpoint;
  auto info = fs->GetFileInfo(bucket);
  if (!info.ok()) {
    return arrow::Status::IOError("cannot reach bucket '", bucket, "' on ", where, ": ",
                                  info.status().message());
  }
  if (info->type() != afs::FileType::Directory) {
    return arrow::Status::Invalid(
        "bucket '", bucket, "' of ", location, " does not exist on ", where,
        " (or these credentials cannot see it): create it, or fix `warehouse` and the "
        "`s3` settings");
  }
  return arrow::Status::OK();
}

void StopObjectStoreRetries(const std::atomic<bool>* stop) { g_stop_retries.store(stop); }

void FinalizeObjectStores() {
  if (afs::IsS3Initialized()) (void)afs::FinalizeS3();
}

}  // namespace floe::iceberg

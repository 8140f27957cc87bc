#include "floe/iceberg/read_cache.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <arrow/buffer.h>

#include "floe/iceberg/positioned_input.h"

namespace floe::iceberg {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kBlockBytes = int64_t{1} << 20;

bool Immutable(const std::string& location) {
  return location.ends_with(".parquet") || location.ends_with(".avro");
}

// The cache's directory and its budget, shared by every object in it.
struct Store {
  fs::path dir;
  int64_t max_bytes = 0;
  int64_t min_free_bytes = 0;
  std::atomic<int64_t> used{0};
  // Set when the local disk failed: nothing more is cached.
  std::atomic<bool> failed{false};
  std::function<void(int64_t)> on_full;
  std::once_flag full_told;

  // Tells on_full, once, that a block was not kept.
  void Full() {
    if (on_full) std::call_once(full_told, [&] { on_full(used.load()); });
  }

  ~Store() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// One object: its size, the blocks of it held in a sparse local file, and the object
// opened on the store once (when a read first misses).
class CachedObject {
 public:
  CachedObject(std::shared_ptr<Store> store, std::shared_ptr<FileIO> inner,
               std::string location, fs::path local)
      : store_(std::move(store)),
        inner_(std::move(inner)),
        location_(std::move(location)),
        local_(std::move(local)) {}
  ~CachedObject() {
    if (fd_ < 0) return;
    ::close(fd_);
    ::unlink(local_.c_str());
    store_->used -= held_bytes_;
  }
  CachedObject(const CachedObject&) = delete;
  CachedObject& operator=(const CachedObject&) = delete;

  arrow::Result<int64_t> Size() {
    std::lock_guard lock(mu_);
    return SizeLocked();
  }

  // Readers of the object (CachedInput). The object stays open on the store only
  // while it has one: the store's input keeps up to a few MiB of the object in memory
  // (small reads, when the cache no longer keeps them), which a merge holding many
  // objects must not keep for all of them.
  void AddReader() {
    std::lock_guard lock(mu_);
    ++readers_;
  }
  void DropReader() {
    std::lock_guard lock(mu_);
    if (--readers_ == 0) remote_.reset();
  }

  // Reads [position, position + nbytes) (cut at the object's end) into `out`.
  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, uint8_t* out) {
    std::unique_lock lock(mu_);
    ARROW_ASSIGN_OR_RAISE(const int64_t size, SizeLocked());
    nbytes = std::max<int64_t>(0, std::min(nbytes, size - position));
    if (nbytes == 0) return 0;
    const int64_t first = position / kBlockBytes;
    const int64_t last = (position + nbytes - 1) / kBlockBytes;
    // Each run of missing blocks is fetched in one request and kept.
    for (int64_t b = first; b <= last;) {
      if (held_[static_cast<size_t>(b)]) {
        ++b;
        continue;
      }
      int64_t end = b;
      while (end + 1 <= last && !held_[static_cast<size_t>(end + 1)]) ++end;
      int64_t start = b * kBlockBytes;
      int64_t length = std::min((end + 1) * kBlockBytes, size) - start;
      // A fetch of a MiB or more, which the store's input does not keep in memory: the
      // short last block of a large object is fetched with the end of the block before
      // it (written, not marked held: fetched again when that block is).
      if (length < kBlockBytes && size >= kBlockBytes) {
        start = size - kBlockBytes;
        length = kBlockBytes;
      }
      ARROW_RETURN_NOT_OK(OpenRemote());
      if (!Keep(length)) return remote_->ReadAt(position, nbytes, out);
      ARROW_ASSIGN_OR_RAISE(auto fetched, remote_->ReadAt(start, length));
      if (fetched->size() != length) {
        return arrow::Status::IOError("reading ", location_, ": ", fetched->size(),
                                      " bytes at ", start, " where ", length,
                                      " were expected");
      }
      if (!WriteLocal(start, *fetched)) {
        // The local disk failed: from now on every read goes to the store.
        store_->used -= length;
        store_->Full();
        return remote_->ReadAt(position, nbytes, out);
      }
      held_bytes_ += length;
      for (int64_t i = b; i <= end; ++i) held_[static_cast<size_t>(i)] = true;
      b = end + 1;
    }
    lock.unlock();
    int64_t done = 0;
    while (done < nbytes) {
      const ssize_t n = ::pread(fd_, out + done, static_cast<size_t>(nbytes - done),
                                static_cast<off_t>(position + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return arrow::Status::IOError("reading the local copy of ", location_, " (",
                                      local_.string(),
                                      "): ", n < 0 ? std::strerror(errno) : "short file");
      }
      done += n;
    }
    return done;
  }

 private:
  // REQUIRES: mu_ held.
  arrow::Result<int64_t> SizeLocked() {
    if (size_ >= 0) return size_;
    ARROW_RETURN_NOT_OK(OpenRemote());
    ARROW_ASSIGN_OR_RAISE(size_, remote_->GetSize());
    held_.assign(static_cast<size_t>((size_ + kBlockBytes - 1) / kBlockBytes), false);
    return size_;
  }

  // The object opened on the store (a HEAD), kept while it has readers. REQUIRES: mu_
  // held.
  arrow::Status OpenRemote() {
    if (remote_ != nullptr) return arrow::Status::OK();
    ARROW_ASSIGN_OR_RAISE(remote_, inner_->OpenInput(location_));
    return arrow::Status::OK();
  }

  // Reserves `bytes` of the store's budget (false: full, its disk failed, or the disk
  // would keep less than min_free_bytes free for what else is written there).
  bool Keep(int64_t bytes) {
    struct statvfs fs{};
    if (store_->failed || ::statvfs(store_->dir.c_str(), &fs) != 0 ||
        static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize) <
            bytes + store_->min_free_bytes) {
      store_->Full();
      return false;
    }
    if (store_->used.fetch_add(bytes) + bytes > store_->max_bytes) {
      store_->used -= bytes;
      store_->Full();
      return false;
    }
    return true;
  }

  // REQUIRES: mu_ held.
  bool WriteLocal(int64_t at, const arrow::Buffer& data) {
    if (fd_ < 0) {
      fd_ = ::open(local_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd_ < 0) {
        store_->failed = true;
        return false;
      }
    }
    int64_t done = 0;
    while (done < data.size()) {
      const ssize_t n =
          ::pwrite(fd_, data.data() + done, static_cast<size_t>(data.size() - done),
                   static_cast<off_t>(at + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        store_->failed = true;
        return false;
      }
      done += n;
    }
    return true;
  }

  std::shared_ptr<Store> store_;
  std::shared_ptr<FileIO> inner_;
  const std::string location_;
  const fs::path local_;
  std::mutex mu_;
  int64_t size_ = -1;
  std::vector<bool> held_;
  int64_t held_bytes_ = 0;
  int readers_ = 0;
  std::shared_ptr<arrow::io::RandomAccessFile> remote_;
  int fd_ = -1;
};

// A reader of a cached object, with a position of its own.
class CachedInput : public PositionedInput {
 public:
  using PositionedInput::ReadAt;

  explicit CachedInput(std::shared_ptr<CachedObject> object)
      : object_(std::move(object)) {
    object_->AddReader();
  }
  ~CachedInput() override { object_->DropReader(); }
  CachedInput(const CachedInput&) = delete;
  CachedInput& operator=(const CachedInput&) = delete;

  arrow::Status Close() override {
    closed_ = true;
    return arrow::Status::OK();
  }
  bool closed() const override { return closed_; }
  arrow::Result<int64_t> GetSize() override { return object_->Size(); }

  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, void* out) override {
    return object_->ReadAt(position, nbytes, static_cast<uint8_t*>(out));
  }

 private:
  std::shared_ptr<CachedObject> object_;
  bool closed_ = false;
};

class ReadCachingFileIO : public FileIO {
 public:
  ReadCachingFileIO(std::shared_ptr<FileIO> inner, std::shared_ptr<Store> store,
                    bool local_too)
      : inner_(std::move(inner)), store_(std::move(store)), local_too_(local_too) {}

  arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> OpenInput(
      const std::string& location) override {
    if (!Cached(location)) return inner_->OpenInput(location);
    return std::make_shared<CachedInput>(ObjectOf(location));
  }
  arrow::Result<std::string> ReadAll(const std::string& location) override {
    if (!Cached(location)) return inner_->ReadAll(location);
    std::shared_ptr<CachedObject> object = ObjectOf(location);
    ARROW_ASSIGN_OR_RAISE(const int64_t size, object->Size());
    std::string out(static_cast<size_t>(size), '\0');
    CachedInput input(object);
    ARROW_ASSIGN_OR_RAISE(const int64_t n, input.ReadAt(0, size, out.data()));
    out.resize(static_cast<size_t>(n));
    return out;
  }
  arrow::Result<std::shared_ptr<arrow::io::OutputStream>> OpenOutput(
      const std::string& location) override {
    return inner_->OpenOutput(location);
  }
  arrow::Status WriteAtomically(const std::string& location, std::string_view data,
                                bool exclusive) override {
    return inner_->WriteAtomically(location, data, exclusive);
  }
  arrow::Status Sync(const std::string& location) override {
    return inner_->Sync(location);
  }
  arrow::Result<bool> Exists(const std::string& location) override {
    return inner_->Exists(location);
  }
  arrow::Status Delete(const std::string& location) override {
    {
      // A file written again under a deleted one's name (never by floe) is read anew.
      std::lock_guard lock(mu_);
      objects_.erase(location);
    }
    return inner_->Delete(location);
  }
  arrow::Result<std::vector<FileEntry>> List(const std::string& prefix) override {
    return inner_->List(prefix);
  }

 private:
  bool Cached(const std::string& location) const {
    return Immutable(location) && (local_too_ || IsObjectStoreLocation(location));
  }
  std::shared_ptr<CachedObject> ObjectOf(const std::string& location) {
    std::lock_guard lock(mu_);
    auto [it, added] = objects_.try_emplace(location);
    if (added) {
      it->second = std::make_shared<CachedObject>(
          store_, inner_, location, store_->dir / (std::to_string(next_++) + ".blocks"));
    }
    return it->second;
  }

  std::shared_ptr<FileIO> inner_;
  std::shared_ptr<Store> store_;
  const bool local_too_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<CachedObject>> objects_;
  int64_t next_ = 0;
};

}  // namespace

arrow::Result<std::shared_ptr<FileIO>> MakeReadCachingFileIO(
    std::shared_ptr<FileIO> inner, const ReadCacheOptions& options) {
  const fs::path parent = options.dir.empty() ? fs::temp_directory_path() : options.dir;
  std::string templ = (parent / "floe-read-cache-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) {
    return arrow::Status::IOError("cannot make a read cache directory in ",
                                  parent.string(), ": ", std::strerror(errno));
  }
  auto store = std::make_shared<Store>();
  store->dir = templ;
  store->max_bytes = options.max_bytes;
  store->min_free_bytes = options.min_free_bytes;
  store->on_full = options.on_full;
  return std::make_shared<ReadCachingFileIO>(std::move(inner), std::move(store),
                                             options.local_too);
}

}  // namespace floe::iceberg

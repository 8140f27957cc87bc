// libFuzzer target for the replication stream decoder. The first input byte picks
// the protocol options; the rest is split at 0xff 0xfe separators into a sequence
// of messages fed to one decoder (so stream-block state is exercised), and each
// piece is also decoded as a CopyData envelope. Every input must give a message or
// a protocol error with an offset inside the input: never a crash, a hang, or a
// read out of bounds (ASan and UBSan are on in the fuzz build).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "floe/source/postgres/pgoutput.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  floe::postgres::PgOutputOptions options;
  options.protocol_version = 1 + data[0] % floe::postgres::kMaxProtocolVersion;
  options.parallel_streaming = options.protocol_version == 4 && (data[0] & 0x80);
  auto decoder = floe::postgres::PgOutputDecoder::Make(options);
  if (!decoder.ok()) std::abort();

  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  while (true) {
    const size_t cut = rest.find("\xff\xfe");
    const std::string_view piece = rest.substr(0, cut);
    auto message = decoder->Decode(piece);
    if (!message.ok()) {
      const auto* error = floe::postgres::GetProtocolError(message.status());
      // A malformed message must be reported as a protocol error inside it.
      if (error == nullptr || error->offset() > piece.size()) std::abort();
    }
    auto envelope = floe::postgres::DecodeReplicationMessage(piece);
    if (!envelope.ok() && floe::postgres::GetProtocolError(envelope.status()) == nullptr) {
      std::abort();
    }
    if (cut == std::string_view::npos) break;
    rest.remove_prefix(cut + 2);
  }
  return 0;
}

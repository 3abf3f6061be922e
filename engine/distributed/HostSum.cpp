#include "distributed/HostSum.h"

#include "base/Bfloat16.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>

namespace glnet {
namespace {

void addFloats(const void* addends, void* sums, std::size_t bytes) {
  const auto* in = static_cast<const float*>(addends);
  auto* out = static_cast<float*>(sums);
  for (std::size_t i = 0; i < bytes / sizeof(float); ++i) out[i] += in[i];
}

void addBfloat16Bytes(const void* addends, void* sums, std::size_t bytes) {
  addBfloat16(static_cast<const std::uint16_t*>(addends), static_cast<std::uint16_t*>(sums), bytes / sizeof(std::uint16_t));
}

constexpr std::size_t cacheLine = 64;

}  // namespace

unsigned HostSum::threadsPerRank(const Communicator& ranks) {
  int hostRanks = 1;
  if (ranks.hostCommunicator() != MPI_COMM_NULL) MPI_Comm_size(ranks.hostCommunicator(), &hostRanks);
  const unsigned cores = std::max(std::thread::hardware_concurrency(), 1u);
  return std::clamp(cores / static_cast<unsigned>(hostRanks), 1u, 8u);
}

HostSum::HostSum(const Communicator& ranks, std::size_t maxBytes, unsigned threads)
    : maxBytes_((maxBytes + cacheLine - 1) / cacheLine * cacheLine), threads_(threads) {
  if (!ranks.distributed() || !ranks.allOnOneHost()) {
    throw Error("sums through shared memory need every rank on one host; use " + optionSetting("all-reduce", "mpi") + " across hosts");
  }
  checkMpi(MPI_Comm_dup(ranks.hostCommunicator(), &ranks_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(ranks_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(ranks_, &rank_);
  int size = 0;
  MPI_Comm_size(ranks_, &size);
  // Each segment in the memory of its own rank's processor socket, not one block laid out by rank 0.
  MPI_Info info = MPI_INFO_NULL;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  void* mine = nullptr;
  const int status = MPI_Win_allocate_shared(static_cast<MPI_Aint>(maxBytes_), 1, info, ranks_, &mine, &window_);
  MPI_Info_free(&info);
  if (status != MPI_SUCCESS) {
    MPI_Comm_free(&ranks_);
    checkMpi(status, ("a shared-memory window of " + std::to_string(maxBytes_ >> 20) + " MiB per rank (MPI_Win_allocate_shared)").c_str());
  }
  for (int r = 0; r < size; ++r) {
    MPI_Aint bytes = 0;
    int unit = 0;
    void* base = nullptr;
    checkMpi(MPI_Win_shared_query(window_, r, &bytes, &unit, &base), "MPI_Win_shared_query");
    segments_.push_back(static_cast<std::uint8_t*>(base));
  }
  // One passive epoch for the window's life: the ranks order their loads and stores with MPI_Win_sync and barriers.
  checkMpi(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_), "MPI_Win_lock_all");
}

HostSum::~HostSum() {
  MPI_Win_unlock_all(window_);
  MPI_Win_free(&window_);
  MPI_Comm_free(&ranks_);
}

void HostSum::synchronise() const {
  MPI_Win_sync(window_);
  checkMpi(MPI_Barrier(ranks_), "MPI_Barrier");
  MPI_Win_sync(window_);
}

HostSum::Slice HostSum::sliceOf(int rank, std::size_t bytes) const {
  const Shard lines = shardOf((bytes + cacheLine - 1) / cacheLine, rank, static_cast<int>(segments_.size()));
  return {std::min(bytes, lines.first * cacheLine), std::min(bytes, (lines.first + lines.count) * cacheLine)};
}

void HostSum::sumBytes(void* values, std::size_t bytes, Add add) {
  GLNET_ASSERT(bytes <= maxBytes_, "a sum larger than its shared-memory window");
  auto* out = static_cast<std::uint8_t*>(values);
  std::uint8_t* mine = segments_[static_cast<std::size_t>(rank_)];
  const auto others = [&](const std::function<void(std::size_t rank, Slice slice)>& each) {
    for (std::size_t r = 0; r < segments_.size(); ++r) {
      if (r != static_cast<std::size_t>(rank_)) each(r, sliceOf(static_cast<int>(r), bytes));
    }
  };
  // Only the slices the other ranks sum leave this process's memory; this rank's own slice is summed where it lies.
  others([&](std::size_t, Slice slice) { threads_.copy(mine + slice.begin, out + slice.begin, slice.end - slice.begin); });
  synchronise();
  const Slice own = sliceOf(rank_, bytes);
  threads_.forEachStripe(own.end - own.begin, [&](std::size_t begin, std::size_t end) {
    std::uint8_t* sums = out + own.begin + begin;
    others([&](std::size_t r, Slice) { add(segments_[r] + own.begin + begin, sums, end - begin); });
    std::memcpy(mine + own.begin + begin, sums, end - begin);
  });
  synchronise();
  others([&](std::size_t r, Slice slice) { threads_.copy(out + slice.begin, segments_[r] + slice.begin, slice.end - slice.begin); });
  // No rank writes its segment for the next sum before every rank has read this one's slices.
  synchronise();
}

void HostSum::sum(float* values, std::size_t count) { sumBytes(values, count * sizeof(float), &addFloats); }

void HostSum::sumBfloat16(std::uint16_t* values, std::size_t count) {
  sumBytes(values, count * sizeof(std::uint16_t), &addBfloat16Bytes);
}

}  // namespace glnet

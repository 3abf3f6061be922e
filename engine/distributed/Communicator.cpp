#include "distributed/Communicator.h"

#include "base/Bfloat16.h"

#include <climits>
#include <cstdlib>
#include <utility>

namespace glnet {

void checkMpi(int status, const char* what) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw Error(std::string(what) + " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

namespace {

int countOf(std::size_t count) {
  GLNET_ASSERT(count <= static_cast<std::size_t>(INT_MAX), "an MPI message of more than INT_MAX elements");
  return static_cast<int>(count);
}

// MPI's user reduction over bfloat16 values (sent as MPI_UINT16_T): inout = in + inout, added in float.
void addBfloat16Values(void* in, void* inout, int* count, MPI_Datatype*) {
  addBfloat16(static_cast<const std::uint16_t*>(in), static_cast<std::uint16_t*>(inout), static_cast<std::size_t>(*count));
}

}  // namespace

bool Communicator::launchedByMpirun() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(variable)) return true;
  }
  return false;
}

Communicator::Communicator() {
  if (!launchedByMpirun()) return;
  checkMpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &threadLevel_), "MPI_Init_thread");
  initialised_ = true;
  // Errors come back as codes and become exceptions, instead of MPI ending the process on its own.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  checkMpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &host_), "MPI_Comm_split_type");
  MPI_Comm_set_errhandler(host_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(host_, &localRank_);
  MPI_Comm_size(host_, &hostSize_);
  checkMpi(MPI_Op_create(&addBfloat16Values, /*commutative*/ 1, &bfloat16Sum_), "MPI_Op_create");
}

Communicator::~Communicator() {
  if (!initialised_) return;
  MPI_Op_free(&bfloat16Sum_);
  MPI_Comm_free(&host_);
  MPI_Finalize();
}

void Communicator::sumInPlace(void* values, std::size_t count, MPI_Datatype type) const {
  if (!initialised_) return;
  checkMpi(MPI_Allreduce(MPI_IN_PLACE, values, countOf(count), type, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
}

void Communicator::sum(float* values, std::size_t count) const { sumInPlace(values, count, MPI_FLOAT); }
void Communicator::sum(double* values, std::size_t count) const { sumInPlace(values, count, MPI_DOUBLE); }
void Communicator::sum(std::uint64_t* values, std::size_t count) const { sumInPlace(values, count, MPI_UINT64_T); }

void Communicator::sumBfloat16(std::uint16_t* values, std::size_t count) const {
  if (!initialised_) return;
  checkMpi(MPI_Allreduce(MPI_IN_PLACE, values, countOf(count), MPI_UINT16_T, bfloat16Sum_, MPI_COMM_WORLD), "MPI_Allreduce");
}

std::string Communicator::firstProblem(const std::string& problem) const {
  if (!initialised_) return problem;
  int failing = problem.empty() ? size_ : rank_;
  checkMpi(MPI_Allreduce(MPI_IN_PLACE, &failing, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  if (failing == size_) return {};
  const std::string told = "rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": " + problem;
  int length = failing == rank_ ? countOf(told.size()) : 0;
  checkMpi(MPI_Bcast(&length, 1, MPI_INT, failing, MPI_COMM_WORLD), "MPI_Bcast");
  std::string text = failing == rank_ ? told : std::string(static_cast<std::size_t>(length), ' ');
  checkMpi(MPI_Bcast(text.data(), length, MPI_CHAR, failing, MPI_COMM_WORLD), "MPI_Bcast");
  return text;
}

std::vector<std::uint32_t> Communicator::gather(const std::vector<std::uint32_t>& values) const {
  if (!initialised_) return values;
  int count = countOf(values.size());
  std::vector<int> counts(static_cast<std::size_t>(size_)), offsets(static_cast<std::size_t>(size_));
  checkMpi(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
  std::vector<std::uint32_t> all;
  if (rank_ == 0) {
    std::size_t total = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      offsets[r] = countOf(total);
      total += static_cast<std::size_t>(counts[r]);
    }
    all.resize(total);
  }
  checkMpi(MPI_Gatherv(values.data(), count, MPI_UINT32_T, all.data(), counts.data(), offsets.data(), MPI_UINT32_T, 0,
                    MPI_COMM_WORLD),
        "MPI_Gatherv");
  return all;
}

void Communicator::abortAll(int code) const {
  if (initialised_) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

Shard shardOf(std::size_t total, int rank, int size) {
  const auto r = static_cast<std::size_t>(rank), n = static_cast<std::size_t>(size);
  const std::size_t base = total / n, extra = total % n;
  return {r * base + std::min(r, extra), base + (r < extra ? 1 : 0)};
}

}  // namespace glnet

#include "train/TrainingInputs.h"

#include "data/ImageFolder.h"
#include "data/TokenData.h"
#include "base/log.h"
#include "importer/Onnx.h"
#include "convert/OnnxNetwork.h"
#include "base/check.h"
#include "model/NetDescription.h"

#include <cmath>
#include <set>

namespace glnet {

StartingNetwork startingNetwork(const NetworkChoice& choice) {
  StartingNetwork start;
  if (!choice.net.empty() && isOnnxPath(choice.net)) {
    OnnxNetwork onnx = readOnnxNetwork(choice.net);
    start.network = Network::fromDescription(onnx.description, choice.seed, choice.net);
    start.network.setParameterValues(start.network.valuesIn(onnx.weights, choice.net));
    if (onnx.stretchLayers) checkOnnxNetwork(start.network, choice.net);
    start.recordedInput = onnx.input;
  } else if (!choice.net.empty()) {
    start.network = Network::fromDescription(readNetDescription(choice.net), choice.seed, choice.net);
  } else {
    if (choice.arch != "cnn" && !builtinNet(choice.arch)) parseArchitecture(choice.arch);
    start.network = Network::create(choice.arch, choice.activation, choice.seed);
  }
  if (!choice.init.empty()) start.network.setParameterValues(start.network.valuesIn(readSafetensors(choice.init), choice.init));
  if (choice.classes && choice.classes != start.network.classes()) {
    start.network = start.network.withClasses(choice.classes, choice.seed, choice.net.empty() ? choice.arch : choice.net);
  }
  return start;
}

DataChoice dataChoice(const OptionValues& options, std::uint32_t seed) {
  DataChoice choice;
  choice.dataset = options.text("dataset");
  const std::set<std::string> datasets{"mnist", "fashion", "cifar10", "folder", "text", "ids"};
  if (!datasets.count(choice.dataset)) {
    // The commands name their flag; in Python the keyword reads as what it is ("the dataset is ..."), as glnet.train said.
    const std::string subject = optionSpelling() == OptionSpelling::flags ? optionName("dataset") : "the dataset";
    throw UsageError(subject + " is mnist, fashion, cifar10, folder, text or ids, not '" + choice.dataset + "'");
  }
  if ((choice.dataset == "cifar10" || choice.dataset == "folder" || choice.dataset == "text" || choice.dataset == "ids") && !options.has("data")) {
    throw UsageError(optionSetting("dataset", choice.dataset) + " needs " + optionName("data") + " DIR");
  }
  choice.directory = options.text("data");
  choice.size = options.has("size") ? static_cast<std::uint32_t>(options.integer("size", 1, 4096)) : 0;
  for (const char* imagesOnly : {"size", "val-fraction"}) {
    if ((choice.dataset == "text" || choice.dataset == "ids") && options.has(imagesOnly)) {
      throw UsageError(optionName(imagesOnly) + " is for images, not " + optionSetting("dataset", choice.dataset));
    }
  }
  if (options.has("val-fraction")) {
    choice.validationFraction = options.number("val-fraction");
    if (!(choice.validationFraction > 0 && choice.validationFraction < 1)) throw UsageError(optionName("val-fraction") + " must be between 0 and 1");
  }
  choice.seed = seed;
  if (options.has("tokenizer")) {
    if (choice.dataset != "text") throw UsageError(optionName("tokenizer") + " is for " + optionSetting("dataset", "text"));
    choice.tokenizer = options.text("tokenizer");
  }
  if (options.has("pad-id")) {
    if (choice.dataset != "text") throw UsageError(optionName("pad-id") + " is for " + optionSetting("dataset", "text"));
    choice.padId = static_cast<std::uint32_t>(options.integer("pad-id", 0, (1 << 24) - 1));
  }
  return choice;
}

void checkTrainingOptions(const TrainingOptions& o) {
  const auto refuse = [](const std::string& option, const std::string& why) { return UsageError(optionName(option) + " " + why); };
  if (!(o.optimizer.learningRate > 0 && std::isfinite(o.optimizer.learningRate))) throw refuse("lr", "must be a positive number within float range");
  if (!(o.optimizer.weightDecay >= 0 && o.optimizer.weightDecay < 1)) throw refuse("weight-decay", "must be from 0 to below 1");
  if (o.optimizer.nesterov && o.optimizer.kind != OptimizerKind::momentum) throw refuse("nesterov", "needs the momentum optimizer");
  if (!(o.optimizer.clipNorm >= 0 && std::isfinite(o.optimizer.clipNorm))) throw refuse("clip-norm", "must be 0 or a positive number");
  if (!(o.warmupEpochs >= 0 && o.warmupEpochs <= 1e6)) throw refuse("warmup-epochs", "must be from 0 to 1000000");
  if (o.warmupEpochs > 0 && o.schedule.kind == ScheduleKind::onecycle) throw refuse("warmup-epochs", "does not apply to onecycle, which warms up itself");
  if (!(o.stepEpochs >= 1 && o.stepEpochs <= 1e6)) throw refuse("step-epochs", "must be from 1 to 1000000");
  if (!(o.schedule.gamma > 0 && o.schedule.gamma <= 1)) throw refuse("step-gamma", "must be in (0, 1]");
  if (o.augment.shift > 64) throw refuse("augment-shift", "must be from 0 to 64");
  if (!(o.labelSmoothing >= 0 && o.labelSmoothing < 1)) throw refuse("label-smoothing", "must be from 0 to below 1");
  if (o.accumulate < 1 || o.accumulate > 65536) throw refuse("accumulate", "must be from 1 to 65536");
  if (o.accumulate > 1 && o.fullBatch) throw refuse("accumulate", "sums several batches per step; a full batch is one");
}

namespace {

std::string directoryOf(const DataChoice& choice) {
  // dataChoice has checked the dataset and that cifar10 and folder have their directory.
  return !choice.directory.empty() ? choice.directory : choice.dataset == "mnist" ? "data/mnist" : "/usr/share/datasets/fashion-mnist";
}

ImageFolderData folderData(const DataChoice& choice, const std::string& directory, const Network& network) {
  // The channels and side the network's image files have (an MLP's inputs flattened from a square of gray or RGB pixels).
  const ImagePreprocessing& images = network.images;
  if (images.resize == ImageResize::none) {
    throw UsageError("an image folder gives square gray or RGB images; the network takes " + describe(network.inputShape));
  }
  const std::uint32_t channels = images.channels;
  const auto side = choice.size ? choice.size : images.width;
  ImageFolderData folders = readImageFolders(directory, channels, side, choice.validationFraction, choice.seed);
  if (folders.classes.size() != network.classes()) {
    throw Error(directory + ": " + std::to_string(folders.classes.size()) + " class folders for a network of " + std::to_string(network.classes()) +
                " classes; to fine-tune it for these, replace its last layer (" + optionSetting("num-classes", std::to_string(folders.classes.size())) + ")");
  }
  return folders;
}

// The token ids a network reads, as its description's embedding and mask layers on its input say; refuses a described
// network that reads images or features.
TokenLimits tokenLimits(const Network& network, const std::string& dataset) {
  // An imported ONNX model's tables are its Gathers' (an id past one gives NaN there): the ids only need to be exact.
  constexpr std::uint32_t exactIds = 1u << 24;
  const std::optional<std::uint32_t> vocabulary =
      network.imported ? exactIds : network.description ? tokenVocabulary(*network.description) : std::nullopt;
  if (!vocabulary) {
    throw UsageError(optionSetting("dataset", dataset) + " gives token ids; the network '" + network.architecture +
                     "' reads " + describe(network.inputShape) + " values that no embedding layer takes as ids");
  }
  return {static_cast<std::uint32_t>(network.inputs()), *vocabulary, network.classes(),
          network.description ? paddingId(*network.description) : std::nullopt,
          network.description && masksCausalAttention(*network.description)};
}

// The id that fills short texts: `given` (--pad-id), which must be the one the network's mask layers hide, else theirs,
// else 0.
std::uint32_t padIdFor(const Network& network, std::optional<std::uint32_t> given) {
  const std::optional<std::uint32_t> masked = network.description ? paddingId(*network.description) : std::nullopt;
  if (given && masked && *given != *masked) {
    throw UsageError(optionSetting("pad-id", std::to_string(*given)) + " differs from the padding id " + std::to_string(*masked) +
                     " that the network's mask layers hide");
  }
  return given ? *given : masked.value_or(0);
}

TextData textData(const DataChoice& choice, const Network& network) {
  const TokenLimits limits = tokenLimits(network, choice.dataset);
  const ByteLevelBpe tokenizer = ByteLevelBpe::fromFile(choice.tokenizer.empty() ? choice.directory + "/tokenizer.json" : choice.tokenizer);
  TextData data = readTextData(choice.directory, tokenizer, padIdFor(network, choice.padId), limits);
  if (data.trainCut || data.testCut) {
    log::warn(std::to_string(data.trainCut) + " training and " + std::to_string(data.testCut) + " test texts are longer than the network's " +
              std::to_string(limits.length) + " tokens; their ends are cut");
  }
  if (!network.classNames.empty() && !data.classNames.empty() && network.classNames != data.classNames) {
    throw Error(choice.directory + "/train.jsonl: its class names differ from the model's");
  }
  return data;
}

// Before reading images for a network that reads token ids.
void refuseImagesForTokens(const DataChoice& choice, const Network& network) {
  if (choice.dataset == "text" || choice.dataset == "ids" || !network.readsTokenIds()) return;
  throw UsageError("the network '" + network.architecture + "' reads token ids (an embedding layer on its input), not the images of " +
                   optionSetting("dataset", choice.dataset) + "; give " + optionSetting("dataset", "text") + " or " + optionSetting("dataset", "ids"));
}

// The first `count` images (0: all), and a check that they fit the network.
void limitAndCheck(LabelledImages& set, std::size_t count, const char* which, const Network& network) {
  if (count > set.images.count) {
    throw UsageError(std::string("the ") + which + " limit " + std::to_string(count) + " is more than the " + std::to_string(set.images.count) + " " +
                     which + " images");
  }
  if (count) keepFirst(set, count);
  if (network.inputs() != set.images.pixelsPerImage()) {
    throw UsageError("the network '" + network.architecture + "' takes " + describe(network.inputShape) + " inputs (" + std::to_string(network.inputs()) +
                     " values) but the images have " + std::to_string(set.images.pixelsPerImage()) + " pixels");
  }
}

}  // namespace

LabelledImages loadDataSplit(const DataChoice& choice, const Network& network, Split split) {
  refuseImagesForTokens(choice, network);
  const std::string directory = directoryOf(choice);
  LabelledImages set;
  if (choice.dataset == "folder") {
    ImageFolderData folders = folderData(choice, directory, network);
    set = std::move(split == Split::train ? folders.train : folders.test);
  } else if (choice.dataset == "text") {
    TextData data = textData(choice, network);
    set = std::move(split == Split::train ? data.train : data.test);
  } else if (choice.dataset == "ids") {
    set = readTokenIdSplit(directory, split, tokenLimits(network, choice.dataset));
  } else if (choice.dataset == "cifar10") {
    set = readCifar10Split(directory, split, static_cast<int>(network.classes()));
  } else {
    set = readMnistSplit(directory, split, static_cast<int>(network.classes()));
  }
  limitAndCheck(set, split == Split::train ? choice.trainLimit : choice.testLimit, split == Split::train ? "training" : "test", network);
  return set;
}

ImageSet textsForNetwork(const Network& network, const std::vector<std::string>& texts, const std::string& tokenizerPath,
                          std::optional<std::uint32_t> padId) {
  const TokenLimits limits = tokenLimits(network, "text");
  const ByteLevelBpe tokenizer = ByteLevelBpe::fromFile(tokenizerPath);
  const std::uint32_t pad = padIdFor(network, padId);
  ImageSet set = emptySequences(texts.size(), limits.length);
  std::size_t cut = 0;
  for (std::size_t i = 0; i < texts.size(); ++i) cut += putSequence(set, i, tokenizer.encode(texts[i]), pad, limits, "text " + std::to_string(i + 1)) ? 1 : 0;
  if (cut) log::warn(std::to_string(cut) + " of the texts are longer than the network's " + std::to_string(limits.length) + " tokens; their ends are cut");
  return set;
}

DataSets loadDataSets(const DataChoice& choice, Network& network) {
  refuseImagesForTokens(choice, network);
  DataSets sets;
  if (choice.dataset == "folder") {  // both splits from one decoding
    ImageFolderData folders = folderData(choice, directoryOf(choice), network);
    sets.train = std::move(folders.train);
    sets.test = std::move(folders.test);
    network.classNames = std::move(folders.classes);
    // Folder images are stretched to the input as they are, never inverted; the model file records it, so that a
    // 28x28 gray network is not taken for one of MNIST's digits (centred by mass, inverted by the border) later.
    network.images.resize = ImageResize::stretch;
    network.images.inversion = Inversion::never;
    limitAndCheck(sets.test, choice.testLimit, "test", network);
    limitAndCheck(sets.train, choice.trainLimit, "training", network);
    return sets;
  }
  if (choice.dataset == "text") {  // both splits, and the class names, from one tokenization
    TextData data = textData(choice, network);
    sets.train = std::move(data.train);
    sets.test = std::move(data.test);
    if (!data.classNames.empty()) network.classNames = std::move(data.classNames);
    limitAndCheck(sets.test, choice.testLimit, "test", network);
    limitAndCheck(sets.train, choice.trainLimit, "training", network);
    return sets;
  }
  sets.train = loadDataSplit(choice, network, Split::train);
  sets.test = loadDataSplit(choice, network, Split::test);
  return sets;
}

}  // namespace glnet

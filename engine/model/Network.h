// A classifier network: an MLP ("784-128-10"), the MNIST CNN ("cnn": conv5x5x32-relu-pool2-conv5x5x64-relu-
// pool2-fc512-relu-fc10, same padding), a described network (model/NetDescription: --net, lenet5, resnet8) or an
// imported ONNX model. Parameters use PyTorch's names and layouts (fcK.weight [out, in],
// convK.weight [out_c, in_c, kh, kw], with their .bias), so a PyTorch state_dict saved as safetensors loads.
#pragma once

#include "graph/Graph.h"
#include "data/Image.h"
#include "model/NetDescription.h"
#include "formats/Safetensors.h"
#include "importer/Onnx.h"
#include "model/ImagePreprocessing.h"
#include "numbers/Activation.h"
#include "ops/Normalize.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace glnet {

// "784-128-10" → {784, 128, 10}; throws UsageError naming what is wrong.
std::vector<int> parseArchitecture(const std::string& text);

// input_mean and input_std of a file's metadata: a number, or one per channel separated by commas (at most 4), each
// in full ("0.5abc", "nan" and "1e999" are refused, not read as 0.5, NaN or infinity); absent: 0 and 1.
InputFormat inputFormatOf(const std::map<std::string, std::string>& metadata, const std::string& path);
// The same values as metadata writes them: "0.1307", or "0.49,0.48,0.45".
std::string formatValues(const std::vector<float>& values);

// Class names from metadata "labels" (one per line), empty when absent; refused when they are not `classes` names.
std::vector<std::string> classNamesOf(const std::map<std::string, std::string>& metadata, std::uint32_t classes, const std::string& path);


struct LayerSpec {
  enum class Kind { conv, pool, flatten, dense };
  Kind kind;
  std::string name;  // convK or fcK: the prefix of its parameters; empty for pool and flatten
  std::uint32_t outputs = 0;
  std::uint32_t kernel = 0;
  std::uint32_t padding = 0;
  Activation activation = Activation::none;
};

struct Network {
  std::string architecture;
  Shape inputShape;  // per image: [784] for an MLP, [1, 28, 28] for the CNN
  Activation activation = Activation::relu;
  InputFormat input;
  std::vector<LayerSpec> layers;
  std::vector<std::string> parameterNames;  // in the order of the graph's parameters
  std::map<std::string, HostTensor> parameters;
  // Whether the file said how its inputs are scaled and which activation it uses; a PyTorch state_dict saved
  // without glnet's metadata gets the defaults (x/255, ReLU), which callers should point out.
  bool inputFormatRecorded = true;
  bool activationRecorded = true;
  // An imported ONNX classifier: the model parsed once from its file (imported->path()), whose graph buildGraph
  // binds to each batch size without reading the file again (layers and parameters stay empty).
  std::optional<ParsedOnnx> imported;
  // A described network (--net NET.json, --arch resnet8): its graph is built from the description (layers stay empty).
  std::optional<NetDescription> description;
  // The classes of an imported or described network.
  std::uint32_t graphClasses = 0;
  // How image files become its input, as its training images were made (recorded in its files).
  ImagePreprocessing images;
  // The classes' names (an image folder's sub-folders), recorded in its files; empty: classes are numbers.
  std::vector<std::string> classNames;

  std::size_t inputs() const { return elementCount(inputShape); }
  // A described network whose embedding layer reads its input: it takes token ids, not pixels.
  bool readsTokenIds() const { return description && tokenVocabulary(*description).has_value(); }
  std::uint32_t classes() const;

  // PyTorch's default initialisation (uniform in ±1/sqrt(fan_in)) from `seed`; "cnn", a built-in description's name
  // (lenet5, resnet8) or layer sizes.
  static Network create(const std::string& architecture, Activation activation, std::uint32_t seed);
  // A described network, initialised as PyTorch does from `seed` (batch normalization: weight 1, bias 0, running
  // mean 0, running variance 1). Throws glnet::Error naming the layer whose shapes do not fit, or when the last layer
  // does not give class scores [N, classes].
  static Network fromDescription(const NetDescription& description, std::uint32_t seed, const std::string& source);
  // From a file's tensors: checks names, ranks, the chain of shapes and the metadata; errors name the tensor.
  // nn.Sequential names (0.weight, 2.weight, ...) are taken in index order as fc1/conv1, ....
  static Network fromTensors(const TensorFile& file, const std::string& path);
  static Network load(const std::string& path) { return fromTensors(readSafetensors(path), path); }
  // An ONNX model whose input is an image batch ([N, ...] floats, fed (x/255 − input_mean)/input_std from uint8
  // pixels, mean and std from its metadata_props) and whose output is class scores [N, classes] (logits or
  // softmax probabilities).
  static Network fromOnnx(const std::string& path);
  // The file metadata recording what a user of the file needs besides its weights: input scaling, image preprocessing,
  // class names (safetensors __metadata__ and ONNX metadata_props alike).
  std::map<std::string, std::string> usageMetadata() const;
  TensorFile toTensors() const;
  void save(const std::string& path) const { writeSafetensors(path, toTensors()); }

  std::vector<std::vector<float>> parameterValues() const;
  // Values for this network's parameters from a file's tensors of the same names (metadata aside); throws glnet::Error
  // naming `path` and the first tensor that is missing, shaped otherwise, not finite, or not this network's.
  std::vector<std::vector<float>> valuesIn(const TensorFile& file, const std::string& path) const;
  void setParameterValues(const std::vector<std::vector<float>>& values);
  // The network with its last layer replaced by one for `classes` classes, freshly initialised from `seed` as
  // PyTorch initialises a layer (transfer learning); every other parameter is kept, and class names are dropped.
  // The last layer is the last dense or convolution layer: a description whose later layers do not keep its
  // channels as the classes is refused, as is an imported ONNX model (fine-tune it through its description).
  Network withClasses(std::uint32_t classes, std::uint32_t seed, const std::string& source) const;
};

// The network as a graph for `batch` images: images [batch, inputShape...] → logits; with labels, also the
// per-row cross-entropy loss and correctness. Without them the graph is for inference, and a convolution followed
// by pooling is one op (conv2dMaxPoolOp). An imported model's graph is its file's, for inference only.
struct NetworkGraph {
  Graph graph;
  Tensor images, labels, logits, loss, correct;
};
// `labelSmoothing`: the loss's (softmaxCrossEntropyOp).
NetworkGraph buildGraph(const Network& network, std::uint32_t batch, bool withLoss = true, float labelSmoothing = 0.0f);

}  // namespace glnet

// What glnet_train and the Python package's glnet.train share before training starts: the network to start from
// (an architecture string, a built-in or described network, or an ONNX model to fine-tune, then --init's weights),
// the options' ranges, and the training and test sets (IDX, CIFAR-10 or an image folder) checked against the network;
// glnet_eval reads its split the same way.
#pragma once

#include "base/OptionValues.h"
#include "data/Idx.h"
#include "model/Network.h"
#include "train/Trainer.h"

#include <optional>
#include <string>

namespace glnet {

struct NetworkChoice {
  std::string arch = "784-128-10";  // an MLP's sizes, cnn, or a built-in description's name; when net is empty
  std::string net;                  // a description file (.json) or an ONNX model (.onnx) to fine-tune
  std::string init;                 // a safetensors file whose weights replace the initial ones
  std::uint32_t classes = 0;        // other than 0: the last layer replaced by a fresh one for this many classes (Network::withClasses)
  Activation activation = Activation::relu;
  std::uint32_t seed = 0;
};

struct StartingNetwork {
  Network network;
  // The input normalization an ONNX model records (glnet's exports), which its weights expect.
  std::optional<InputFormat> recordedInput;
};

// Throws glnet::Error (or UsageError for a bad choice) naming the file and what is wrong.
StartingNetwork startingNetwork(const NetworkChoice& choice);

// Made by dataChoice, which checks it.
struct DataChoice {
  std::string dataset = "mnist";  // mnist, fashion, cifar10, folder, text or ids
  std::string directory;          // empty: data/mnist, or Debian's Fashion-MNIST
  std::uint32_t size = 0;         // folder: the images' side (0: the network's)
  double validationFraction = 0;  // folder: held out of each class when there is no train/ and test/
  std::uint32_t seed = 0;         // folder: which images are held out
  std::string tokenizer;          // text: its tokenizer.json (empty: DIR/tokenizer.json)
  std::optional<std::uint32_t> padId;  // text: what fills a short text (empty: the network's mask layers' pad, else 0)
  std::size_t trainLimit = 0, testLimit = 0;  // 0: all
};

struct DataSets {
  LabelledImages train, test;
};

// The data set that the options dataset, data, size and val-fraction name (glnet_train, glnet.train and glnet_eval
// take them alike), `seed` drawing a folder's held-out images; bad options are usage errors before anything is read.
DataChoice dataChoice(const OptionValues& options, std::uint32_t seed);

// Throws UsageError when an option is out of its range, naming it as the front end takes it (optionName).
void checkTrainingOptions(const TrainingOptions& options);

// The data sets for `network`, whose input they must fit (one line naming the mismatch otherwise). An image folder
// names the network's classes (Network::classNames: its sub-folders), so that the model file records them.
DataSets loadDataSets(const DataChoice& choice, Network& network);
// `texts` as the input of `network` (token ids), tokenized with the tokenizer.json at `tokenizerPath`, cut or padded
// as --dataset text makes them (`padId`: --pad-id); errors name the text by its number from 1.
ImageSet textsForNetwork(const Network& network, const std::vector<std::string>& texts, const std::string& tokenizerPath,
                          std::optional<std::uint32_t> padId);
// One of them (glnet_eval).
LabelledImages loadDataSplit(const DataChoice& choice, const Network& network, Split split);

}  // namespace glnet

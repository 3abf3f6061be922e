#include "base/Bfloat16.h"
#include "base/check.h"
#include "model/Network.h"
#include "formats/Safetensors.h"
#include "support/Random.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

using namespace glnet;

namespace {

// A safetensors file from a literal JSON header and data bytes.
std::string safetensors(const std::string& header, const std::string& data) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return bytes + header + data;
}

std::string floats(std::initializer_list<float> values) {
  std::string bytes(values.size() * 4, '\0');
  std::memcpy(bytes.data(), std::data(values), bytes.size());
  return bytes;
}

}  // namespace

TEST_CASE("safetensors round trip keeps names, shapes, values and metadata") {
  const test::TempDir directory;
  const Network model = Network::create("13-7-3", Activation::tanh, 5);
  const std::string path = directory.file("model.safetensors");
  model.save(path);
  const Network back = Network::load(path);
  CHECK(back.architecture == "13-7-3");
  CHECK(back.activation == Activation::tanh);
  CHECK(back.parameterNames == model.parameterNames);
  CHECK(back.parameterValues() == model.parameterValues());
  const TensorFile file = readSafetensors(path);
  CHECK(file.tensors.at("fc1.weight").shape == std::vector<std::int64_t>{7, 13});
  CHECK(file.metadata.at("architecture") == "13-7-3");
  // No temporary file is left behind.
  CHECK(std::distance(std::filesystem::directory_iterator(directory.path()), std::filesystem::directory_iterator()) == 1);
}

TEST_CASE("F16, BF16 and F64 tensors convert to float on load and record what the file stored") {
  const test::TempDir directory;
  std::string data(2 * 2 + 8 + 3 * 2 + 4, '\0');
  const std::uint16_t halves[2] = {0x3c00, 0xc100};  // 1.0, -2.5
  const double wide = 0.125;
  const std::uint16_t brains[3] = {0x3f80, 0xc0a0, 0x7fc0};  // 1.0, -5.0, NaN
  const float single = 3.5f;
  std::memcpy(data.data(), halves, 4);
  std::memcpy(data.data() + 4, &wide, 8);
  std::memcpy(data.data() + 12, brains, 6);
  std::memcpy(data.data() + 18, &single, 4);
  const std::string path = directory.write(
      "mixed.safetensors", safetensors(R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
                                       R"("d":{"dtype":"F64","shape":[1],"data_offsets":[4,12]},)"
                                       R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[12,18]},)"
                                       R"("f":{"dtype":"F32","shape":[1],"data_offsets":[18,22]}})",
                                       data));
  const TensorFile file = readSafetensors(path);
  CHECK(file.tensors.at("h").values == std::vector<float>{1.0f, -2.5f});
  CHECK(file.tensors.at("d").values == std::vector<float>{0.125f});
  CHECK(file.tensors.at("b").values[0] == 1.0f);
  CHECK(file.tensors.at("b").values[1] == -5.0f);
  CHECK(std::isnan(file.tensors.at("b").values[2]));
  CHECK(file.tensors.at("f").values == std::vector<float>{3.5f});
  CHECK(file.tensors.at("h").stored == StoredDtype::f16);
  CHECK(file.tensors.at("d").stored == StoredDtype::f64);
  CHECK(file.tensors.at("b").stored == StoredDtype::bf16);
  CHECK(file.tensors.at("f").stored == StoredDtype::f32);
  CHECK(std::string(storedDtypeName(StoredDtype::bf16)) == "BF16");
}

TEST_CASE("a tensor larger than the read chunk converts whole") {
  const test::TempDir directory;
  const std::size_t count = (std::size_t{1} << 18) + 3;  // a chunk of readValues and 3 elements more
  std::string data(count * 2, '\0');
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint16_t value = toBfloat16(static_cast<float>(i % 256));
    std::memcpy(data.data() + 2 * i, &value, 2);
  }
  const std::string path = directory.write(
      "long.safetensors", safetensors(R"({"t":{"dtype":"BF16","shape":[)" + std::to_string(count) + R"(],"data_offsets":[0,)" +
                                          std::to_string(data.size()) + "]}}",
                                      data));
  const std::vector<float> values = readSafetensors(path).tensors.at("t").values;
  REQUIRE(values.size() == count);
  bool same = true;
  for (std::size_t i = 0; i < count; ++i) same = same && values[i] == static_cast<float>(i % 256);
  CHECK(same);
}

TEST_CASE("sharded checkpoints: every shard read, every tensor exactly where the index says") {
  const test::TempDir directory;
  const auto shard = [&](const std::string& name, const std::vector<std::pair<std::string, float>>& tensors) {
    std::string header = "{", data;
    for (const auto& [tensor, value] : tensors) {
      header += (header.size() > 1 ? "," : "") + ("\"" + tensor + "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[") +
                std::to_string(data.size()) + "," + std::to_string(data.size() + 4) + "]}";
      data += floats({value});
    }
    directory.write(name, safetensors(header + "}", data));
  };
  shard("a.safetensors", {{"x", 1.0f}, {"y", 2.0f}});
  shard("b.safetensors", {{"z", 3.0f}});
  const std::string index = directory.write(
      "model.safetensors.index.json",
      R"({"metadata":{"total_size":12},"weight_map":{"x":"a.safetensors","y":"a.safetensors","z":"b.safetensors"}})");
  const TensorFile file = readShardedSafetensors(index);
  CHECK(file.tensors.size() == 3);
  CHECK(file.tensors.at("z").values == std::vector<float>{3.0f});
  const auto refuse = [&](const std::string& text, const std::string& reason) {
    CAPTURE(text);
    const std::string path = directory.write("index.json", text);
    CHECK_THROWS_WITH_AS(readShardedSafetensors(path), doctest::Contains(reason.c_str()), Error);
  };
  refuse(R"({"weight_map":{"x":"a.safetensors"}})", "a.safetensors: tensor y is not in the weight_map of");
  refuse(R"({"weight_map":{"x":"a.safetensors","y":"b.safetensors","z":"b.safetensors"}})", "tensor y is mapped to another shard by");
  refuse(R"({"weight_map":{"x":"a.safetensors","y":"a.safetensors","z":"b.safetensors","w":"b.safetensors"}})",
         "b.safetensors: lacks tensor w, which");
  refuse(R"({"weight_map":{"x":"a.safetensors","y":"a.safetensors","z":"c.safetensors"}})", "c.safetensors: no such file");
  refuse(R"({"weight_map":{"x":"../a.safetensors"}})", "weight_map entry of x is not a file name in the index's folder");
  refuse(R"({"weight_map":{"x":"/etc/passwd"}})", "weight_map entry of x is not a file name in the index's folder");
  refuse(R"({"weight_map":{"x":7}})", "weight_map entry of x is 7, not a file name");
  refuse(R"({"weight_map":{}})", "weight_map names no tensor");
  refuse(R"({"metadata":{}})", "no weight_map object");
  refuse(R"({"weight_map":{"x":"a.safetensors","x":"a.safetensors"}})", "\"x\" appears twice in one object");
  refuse("[", "not valid JSON");
  // A name in two shards: the second shard's copy is mapped to the first.
  shard("c.safetensors", {{"y", 5.0f}});
  refuse(R"({"weight_map":{"x":"a.safetensors","y":"a.safetensors","z":"c.safetensors"}})", "tensor y is mapped to another shard");
}

TEST_CASE("malformed safetensors files are refused with the reason and the tensor") {
  const test::TempDir directory;
  const auto refuse = [&](const std::string& name, const std::string& bytes, const std::string& reason) {
    CAPTURE(name);
    const std::string path = directory.write(name, bytes);
    CHECK_THROWS_WITH_AS(readSafetensors(path), doctest::Contains(reason.c_str()), Error);
  };
  refuse("short", "abc", "too short");
  refuse("huge-header", std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) + "{}", "header length");
  refuse("garbage", safetensors("{not json", ""), "not valid JSON");
  refuse("dtype", safetensors(R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0')),
         "tensor a has dtype I64");
  refuse("shape", safetensors(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')),
         "tensor a: shape needs 12 bytes");
  refuse("past-end", safetensors(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", std::string(8, '\0')),
         "tensor a: data_offsets [0, 16] run past the end");
  refuse("overlap",
         safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                     std::string(12, '\0')),
         "overlap");
  refuse("missing-file-is-not-here", "", "too short");
  CHECK_THROWS_WITH_AS(readSafetensors(directory.file("absent.safetensors")), doctest::Contains("no such file"), Error);
  // The format's rules exactly: unique names, ranges that tile the data section to the end of the file.
  const std::string a = R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  refuse("duplicate", safetensors("{" + a + "," + a + "}", std::string(4, '\0')), "\"a\" appears twice in one object");
  refuse("hole", safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, '\0')),
         "bytes 0 to 4 of the data section belong to no tensor");
  refuse("trailing", safetensors("{" + a + "}", std::string(6, '\0')), "2 bytes after the last tensor belong to no tensor");
  std::string oneShort = safetensors("{" + a + "} ", std::string(4, '\0'));
  oneShort[0] = static_cast<char>(oneShort[0] - 1);  // the padding space becomes a data byte
  refuse("one-short", oneShort, "1 byte after the last tensor belongs to no tensor");
  refuse("deep", safetensors(R"({"__metadata__":)" + std::string(40, '[') + std::string(40, ']') + "}", ""),
         "nested deeper than 32 levels");
  refuse("wrapping", safetensors(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", ""),
         "more than 2^40 elements");
  CHECK_THROWS_WITH_AS(readSafetensors(directory.path().string()), doctest::Contains("is a directory"), Error);
  CHECK_THROWS_WITH_AS(readSafetensors("/dev/zero"), doctest::Contains("/dev/zero: not a regular file"), Error);
}

TEST_CASE("a CNN round-trips and is recognised from its tensors alone") {
  const test::TempDir directory;
  const Network cnn = Network::create("cnn", Activation::relu, 9);
  CHECK(cnn.inputs() == 784u);
  CHECK(cnn.classes() == 10u);
  CHECK(cnn.parameters.at("conv2.weight").shape == std::vector<std::int64_t>{64, 32, 5, 5});
  CHECK(cnn.parameters.at("fc1.weight").shape == std::vector<std::int64_t>{512, 3136});
  TensorFile file = cnn.toTensors();
  file.metadata.clear();  // as a PyTorch state_dict saved with safetensors would be
  const std::string path = directory.file("cnn.safetensors");
  writeSafetensors(path, file);
  const Network back = Network::load(path);
  CHECK(back.architecture == "cnn");
  CHECK(back.parameterValues() == cnn.parameterValues());
  file.tensors["fc1.weight"] = {{512, 3000}, std::vector<float>(512 * 3000)};
  writeSafetensors(path, file);
  CHECK_THROWS_WITH_AS(Network::load(path), doctest::Contains("fc1.weight takes 3000 inputs but the convolutions give 3136"), Error);
}

TEST_CASE("model files are checked against the architecture") {
  const test::TempDir directory;
  const auto refuse = [&](const std::string& name, const std::string& bytes, const std::string& reason) {
    CAPTURE(name);
    const std::string path = directory.write(name, bytes);
    CHECK_THROWS_WITH_AS(Network::load(path), doctest::Contains(reason.c_str()), Error);
  };
  const std::string twoByTwo = floats({1, 2, 3, 4});
  refuse("no-fc1", safetensors(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", twoByTwo), "no tensor fc1.weight");
  refuse("bias-shape",
         safetensors(R"({"fc1.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},"fc1.bias":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                     twoByTwo),
         "fc1.bias must be [1]");
  refuse("chain",
         safetensors(R"({"fc1.weight":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]},"fc1.bias":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                     R"("fc2.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[8,16]},"fc2.bias":{"dtype":"F32","shape":[1],"data_offsets":[16,20]}})",
                     twoByTwo + floats({5})),
         "fc2.weight takes 2 inputs but fc1 gives 1");
  refuse("metadata",
         safetensors(R"({"__metadata__":{"architecture":"2-5"},"fc1.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},"fc1.bias":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                     floats({1, 2, 3})),
         "metadata says architecture 2-5 but the tensors make 2-1");
  refuse("metadata-number",
         safetensors(R"({"__metadata__":{"input_mean":"0.5abc"},"fc1.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},"fc1.bias":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                     floats({1, 2, 3})),
         "metadata input_mean is not a finite number");
  refuse("not-finite",
         safetensors(R"({"fc1.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},"fc1.bias":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                     floats({1, NAN, 3})),
         "tensor fc1.weight holds NaN or infinite values");
}

TEST_CASE("an nn.Sequential state_dict loads by the order of its layer indices") {
  const test::TempDir directory;
  const Network cnn = Network::create("cnn", Activation::relu, 3);
  TensorFile sequential;  // conv, relu, pool, conv, relu, pool, flatten, linear, relu, linear: indices 0, 3, 7, 9
  const std::pair<const char*, const char*> names[] = {{"conv1", "features.0"}, {"conv2", "features.3"}, {"fc1", "features.7"}, {"fc2", "features.9"}};
  for (const auto& [glnet, torch] : names) {
    sequential.tensors[std::string(torch) + ".weight"] = cnn.parameters.at(std::string(glnet) + ".weight");
    sequential.tensors[std::string(torch) + ".bias"] = cnn.parameters.at(std::string(glnet) + ".bias");
  }
  const std::string path = directory.file("sequential.safetensors");
  writeSafetensors(path, sequential);
  const Network back = Network::load(path);
  CHECK(back.architecture == "cnn");
  CHECK(back.parameterValues() == cnn.parameterValues());
  CHECK_FALSE(back.inputFormatRecorded);
  CHECK_FALSE(back.activationRecorded);
  sequential.tensors["head.0.weight"] = {{1}, {0.0f}};  // a second prefix: not one Sequential
  writeSafetensors(path, sequential);
  CHECK_THROWS_WITH_AS(Network::load(path), doctest::Contains("no tensor fc1.weight"), Error);
}

TEST_CASE("architecture strings parse or fail as usage errors") {
  CHECK(parseArchitecture("784-128-10") == std::vector<int>{784, 128, 10});
  CHECK_THROWS_AS(parseArchitecture("784"), UsageError);
  CHECK_THROWS_AS(parseArchitecture("784--10"), UsageError);
  CHECK_THROWS_AS(parseArchitecture("784-x-10"), UsageError);
  // Only the canonical spelling, so that what a model file records is what its tensors make again.
  for (const char* text : {"784-10-", "-784-10", "784-+10", "0784-10", "784-010", "784- 10", "784-10 ", "784-1e2"}) {
    CAPTURE(text);
    CHECK_THROWS_AS(parseArchitecture(text), UsageError);
  }
  std::string deep = "784";
  for (int layer = 0; layer < 256; ++layer) deep += "-8";
  CHECK(parseArchitecture(deep).size() == 257);
  CHECK_THROWS_WITH_AS(parseArchitecture(deep + "-10"), doctest::Contains("has more than 256 layers"), UsageError);
  CHECK_THROWS_AS(parseActivation("gelu"), UsageError);
}

TEST_CASE("model files record how images become inputs and the class names; old files get the rule training used") {
  Network rgb = Network::create("768-8-3", Activation::relu, 1);  // an MLP of 16x16 RGB images, as an image folder gives them
  CHECK(rgb.images.resize == ImageResize::stretch);
  CHECK(rgb.images.channels == 3);
  CHECK(rgb.images.width == 16);
  rgb.classNames = {"circle", "cross", "square"};
  TensorFile file = rgb.toTensors();
  CHECK(file.metadata.at("image_resize") == "stretch");
  CHECK(file.metadata.at("labels") == "circle\ncross\nsquare\n");
  const Network loaded = Network::fromTensors(file, "m.safetensors");
  CHECK(loaded.images.resize == ImageResize::stretch);
  CHECK(loaded.classNames == rgb.classNames);
  CHECK(Network::create("784-8-10", Activation::relu, 1).images.resize == ImageResize::mnistDigit);
  CHECK(Network::create("10-8-2", Activation::relu, 1).images.resize == ImageResize::none);
  // A file of elsewhere (a PyTorch state_dict, an older glnet file) gets what glnet_train would have made of its images.
  TensorFile old = file;
  for (const char* key : {"image_resize", "image_invert", "image_size", "image_channels", "labels"}) old.metadata.erase(key);
  CHECK(Network::fromTensors(old, "old.safetensors").images.resize == ImageResize::stretch);
  CHECK(Network::fromTensors(old, "old.safetensors").classNames.empty());
  // An ONNX model of elsewhere is cropped as torchvision evaluates.
  const ImagePreprocessing imported = defaultPreprocessing({3, 224, 224}, true);
  CHECK(imported.resize == ImageResize::centreCrop);
  CHECK(imported.shorterSide == 256);
  TensorFile bad = file;
  bad.metadata["labels"] = "circle\ncross\n";
  CHECK_THROWS_WITH_AS(Network::fromTensors(bad, "m.safetensors"), doctest::Contains("m.safetensors: metadata labels names 2 classes; the model has 3"), Error);
  bad = file;
  bad.metadata["image_resize"] = "fisheye";
  CHECK_THROWS_WITH_AS(Network::fromTensors(bad, "m.safetensors"), doctest::Contains("image_resize is mnist-digit, stretch or centre-crop"), Error);
  bad.metadata["image_resize"] = "centre-crop";
  CHECK_THROWS_WITH_AS(Network::fromTensors(bad, "m.safetensors"), doctest::Contains("needs image_shorter_side"), Error);
  bad.metadata["image_shorter_side"] = "20";
  CHECK(Network::fromTensors(bad, "m.safetensors").images.shorterSide == 20);
}

TEST_CASE("a network's last layer is replaced for other classes, every other weight kept") {
  const Network mlp = Network::create("784-16-10", Activation::relu, 1);
  const Network three = mlp.withClasses(3, 7, "784-16-10");
  CHECK(three.architecture == "784-16-3");
  CHECK(three.classes() == 3);
  CHECK(three.parameters.at("fc1.weight").values == mlp.parameters.at("fc1.weight").values);
  CHECK(three.parameters.at("fc2.weight").shape == std::vector<std::int64_t>{3, 16});
  CHECK(three.parameterNames == mlp.parameterNames);
  const Network cnn = Network::create("cnn", Activation::relu, 1).withClasses(4, 7, "cnn");
  CHECK(cnn.classes() == 4);
  CHECK(Network::fromTensors(cnn.toTensors(), "cnn.safetensors").classes() == 4);
  const Network lenet = Network::create("lenet5", Activation::relu, 1);
  const Network five = lenet.withClasses(5, 7, "lenet5");
  CHECK(five.classes() == 5);
  for (const auto& [name, tensor] : lenet.parameters) {
    if (five.parameters.at(name).shape == tensor.shape) CHECK(five.parameters.at(name).values == tensor.values);
  }
  CHECK(Network::fromTensors(five.toTensors(), "five.safetensors").classes() == 5);
  CHECK_THROWS_AS(mlp.withClasses(1, 7, "784-16-10"), UsageError);
}

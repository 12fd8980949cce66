# Read by ctest after the discovered tests (tests/CMakeLists.txt): the longest
# tests, with their rough seconds on 2 cores, so that `ctest -j` starts them
# first. A clean build has no Testing/Temporary/CTestCostData.txt, and without
# costs ctest starts tests in the order they were added, so a long test among
# the last ones would run on alone at the end while the other core idles.
# Only the order changes; a name that is not a test (renamed, or not built) is
# ignored. Release and ASan figures mixed: what matters is that these go first.
set(kakeya_costs
  [==[Fixtures/SpeculativeLossless.GreedyTokensEqualPlainDecoding/tiny_gemma3_f32]==] 60
  [==[Fixtures/SpeculativeLossless.GreedyTokensEqualPlainDecoding/g4moe_f32]==] 60
  [==[Fixtures/SpeculativeLossless.GreedyTokensEqualPlainDecoding/g4dense_f32]==] 60
  [==[Fixtures/SpeculativeLossless.GreedyTokensEqualPlainDecoding/tiny_gemma2_f32]==] 60
  [==[MtpDrafter.GreedyTokensEqualPlainDecoding]==] 45
  [==[Fixtures/SpeculativeLossless.GreedyTokensEqualPlainDecoding/tiny_qwen3_f32]==] 38
  [==[Fixtures/SpeculativeLossless.GreedyTokensEqualPlainDecoding/tiny_llama_bf16]==] 38
  [==[Fixtures/SpeculativeLossless.GreedyTokensEqualPlainDecoding/tiny_llama_f32]==] 38
  [==[Fixtures/SpeculativeLossless.GreedyTokensEqualPlainDecoding/tiny_llama_f16]==] 38
  [==[Fixtures/SpeculativeLossless.GreedyTokensEqualPlainDecoding/glm4moe_mtp_f32]==] 36
  [==[Fixtures/SpeculativeLossless.GreedyTokensEqualPlainDecoding/q3moe_f16]==] 34
  [==[SpeculativeLosslessSlow.RingWrapsRepresentativeBlockSizes]==] 30
  [==[Fixtures/BatchInvarianceTest.RowsAreBitIdentical/tiny_gemma3_f32]==] 29
  [==[Fixtures/BatchInvarianceTest.RowsAreBitIdentical/g4moe_f32]==] 26
  [==[ShippedDraftersSlow.GreedyOutputEqualsPlainAcrossRingWraps]==] 25
  [==[Fixtures/BatchInvarianceTest.RowsAreBitIdentical/g4dense_f32]==] 25
  [==[Fixtures/BatchInvarianceTest.RowsAreBitIdentical/tiny_gemma2_f32]==] 24
  [==[SpeculativeSamplingSlow.NgramDrafterKeepsTheTargetDistribution]==] 17
  [==[SpeculativeSamplingSlow.DraftModelKeepsTheTargetDistribution]==] 15
  [==[Drafters/SchedulerTest.RequestsTogetherEqualEachAlone/"auto"]==] 15
  [==[Drafters/SchedulerTest.RequestsTogetherEqualEachAlone/"dflash"]==] 15
  [==[Tokenizer.PathologicalInputsTokenize]==] 14
  [==[Drafters/SchedulerTest.RequestsTogetherEqualEachAlone/"draft"]==] 14
  [==[Drafters/SchedulerTest.RequestsTogetherEqualEachAlone/"mtp"]==] 14
  [==[KvCacheModel.RandomBlocksTrimsAndCommitsMatchThePlainPathBitForBit]==] 14
  [==[NoAllocationDrafters.DraftersThatReadTheTargetDoNotAllocate]==] 13
  [==[Drafters/SchedulerTest.RequestsTogetherEqualEachAlone/"ngram"]==] 12
  [==[Drafters/SchedulerTest.RequestsTogetherEqualEachAlone/"none"]==] 12
)
# gtest_discover_tests leaves each binary's test names in <binary>_TESTS and
# names a parameterized test "<name>  # GetParam() = <value>".
get_cmake_property(kakeya_vars VARIABLES)
list(FILTER kakeya_vars INCLUDE REGEX "_TESTS$")
set(kakeya_tests)
foreach(v IN LISTS kakeya_vars)
  list(APPEND kakeya_tests ${${v}})
endforeach()
while(kakeya_costs)
  list(POP_FRONT kakeya_costs name cost)
  foreach(t IN LISTS kakeya_tests)
    if(t STREQUAL name OR (t MATCHES "^(.*)  # GetParam\\(\\) = " AND CMAKE_MATCH_1 STREQUAL name))
      set_tests_properties("${t}" PROPERTIES COST ${cost})
    endif()
  endforeach()
endwhile()

# cmake -DPROGRAM=... [-DARGS=a;b] [-DENV_SET=NAME=value] -DEXPECT_REGEX=re -P expect_failure.cmake
# Runs PROGRAM (with NAME=value in its environment) and passes only when it
# exits non-zero and its output (stdout and stderr) matches EXPECT_REGEX:
# a bad configuration must fail, and say which variable is wrong.
if(NOT DEFINED PROGRAM OR NOT DEFINED EXPECT_REGEX)
  message(FATAL_ERROR "expect_failure.cmake: -DPROGRAM= and -DEXPECT_REGEX= are required")
endif()
if(DEFINED ENV_SET)
  string(FIND "${ENV_SET}" "=" eq)
  string(SUBSTRING "${ENV_SET}" 0 ${eq} env_name)
  math(EXPR eq "${eq} + 1")
  string(SUBSTRING "${ENV_SET}" ${eq} -1 env_value)
  set(ENV{${env_name}} "${env_value}")
endif()
string(REPLACE " " ";" args "${ARGS}")
execute_process(COMMAND ${PROGRAM} ${args} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc
  TIMEOUT 50)
set(all "${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} ${ARGS} with ${ENV_SET} succeeded; it must fail. Output:\n${all}")
endif()
if(NOT all MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "${PROGRAM} ${ARGS} with ${ENV_SET} failed (${rc}) but its output does not match "
    "'${EXPECT_REGEX}':\n${all}")
endif()
message(STATUS "${PROGRAM} failed as expected (${rc}) and printed:\n${all}")

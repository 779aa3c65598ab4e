# Writes OUT (a header defining SPB_GIT_SHA) from the work tree in SRC: the short sha, "-dirty" when tracked files
# differ from it, "unknown" outside git. Run at every build; the file is rewritten only when its content changes,
# so a build after a commit carries the new sha and an unchanged tree recompiles nothing.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE sha OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT sha)
  set(sha unknown)
endif()
if(dirty)
  set(sha "${sha}-dirty")
endif()
set(content "#pragma once\n#define SPB_GIT_SHA \"${sha}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${content}")
  file(WRITE ${OUT} "${content}")
endif()

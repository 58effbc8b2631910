# Writes the file IN as a C array NAME (with NAME_len) into OUT.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR size "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT} "/* Generated from ${IN} by cmake/embed.cmake. */\n#include <stddef.h>\n"
  "extern const unsigned char ${NAME}[];\nextern const size_t ${NAME}_len;\n"
  "__attribute__((aligned(8))) const unsigned char ${NAME}[] = {\n${bytes}};\n"
  "const size_t ${NAME}_len = ${size};\n")

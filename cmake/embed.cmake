# Turns a file into a C source defining `const char NAME[]` (NUL-terminated)
# and `const unsigned long NAME_len`. Used for the built-in YAML defaults.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE ${OUT} "/* generated from ${IN}; do not edit */\n"
  "extern const char ${NAME}[];\nextern const unsigned long ${NAME}_len;\n"
  "const char ${NAME}[] = {\n${body}0x00};\n"
  "const unsigned long ${NAME}_len = ${len};\n")

#ifndef TESSERA_CLIBXML2_SHIM_H
#define TESSERA_CLIBXML2_SHIM_H

// Debian builds libxml2 with ICU support. Its headers then include <unicode/ucnv.h>, whose
// `UErrorCode` clashes with the copy Foundation carries on Linux. Tessera never uses the ICU
// encoders of libxml2, so the flag is dropped right after xmlversion.h defines it.
#include <libxml/xmlversion.h>
#undef LIBXML_ICU_ENABLED

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xpath.h>
#include <libxml/xpathInternals.h>
#include <libxml/xmlreader.h>
#include <libxml/xmlerror.h>

#endif

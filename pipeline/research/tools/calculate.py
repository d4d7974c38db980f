"""Safe arithmetic for the `calculate` tool: numbers, + - * / // % **, parentheses, a few functions; no code runs."""
from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable

MAX_EXPRESSION_CHARS = 300
MAX_EXPONENT = 1_000
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., float]] = {
    "round": round, "abs": abs, "min": min, "max": max, "sqrt": math.sqrt, "log": math.log,
    "log10": math.log10, "exp": math.exp}


class CalcError(ValueError):
    """The expression is not plain arithmetic; the message tells the model what is allowed."""


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    # Not bool (an int subclass): True and False are not numbers here.
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and (
            abs(right) > MAX_EXPONENT or (abs(left) > 1 and right * math.log10(abs(left)) > 308)
        ):
            raise CalcError("the result is too large")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
            and not node.keywords and 0 < len(node.args) <= 8):
        return _FUNCTIONS[node.func.id](*(_eval(a) for a in node.args))
    raise CalcError("only numbers, + - * / // % **, parentheses and "
                    + ", ".join(sorted(_FUNCTIONS)) + " are allowed")


def calculate(expression: str) -> str:
    """The value of an arithmetic expression as text, or "CALC_ERROR: ..." the model can act on; never raises."""
    expr = _THOUSANDS.sub("", expression.strip())
    expr = expr.replace("×", "*").replace("÷", "/").replace("^", "**")
    if expr.endswith("%"):
        expr = expr[:-1]
    if not expr or len(expr) > MAX_EXPRESSION_CHARS:
        return f"CALC_ERROR: give one arithmetic expression of at most {MAX_EXPRESSION_CHARS} characters"
    try:
        value = _eval(ast.parse(expr, mode="eval"))
    except CalcError as e:
        return f"CALC_ERROR: {e}"
    except ZeroDivisionError:
        return "CALC_ERROR: division by zero"
    except (SyntaxError, ValueError, OverflowError, TypeError, RecursionError, MemoryError) as e:
        return f"CALC_ERROR: not a valid arithmetic expression ({type(e).__name__})"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "CALC_ERROR: the result is not a finite number"
        value = round(value, 10)
        if value.is_integer() and abs(value) < 1e15:
            value = int(value)
    return str(value)
